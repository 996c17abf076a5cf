#include "core/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "core/error.hpp"

namespace psbed {

void setup_logging(const std::string& node_name, const std::string& level) {
  auto logger = spdlog::get("psbed");
  if (!logger) logger = spdlog::stderr_color_mt("psbed");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("[%H:%M:%S.%e " + node_name + "] %^%v%$");
  auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off")
    throw Error("unknown log level '" + level + "', expected trace, debug, info, warn or error");
  spdlog::set_level(lvl);
}

}  // namespace psbed
