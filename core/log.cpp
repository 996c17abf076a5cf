#include "core/log.hpp"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "core/error.hpp"

namespace psbed {

void setup_logging(const std::string& node_name, const std::string& level,
                   const std::string& file) {
  auto logger = spdlog::get("psbed");
  if (!logger) logger = spdlog::stderr_color_mt("psbed");
  if (!file.empty()) {
    try {
      logger->sinks().push_back(std::make_shared<spdlog::sinks::basic_file_sink_mt>(file, true));
    } catch (const spdlog::spdlog_ex& e) {
      throw Error("cannot write the log file '" + file + "': " + e.what());
    }
    logger->flush_on(spdlog::level::trace);
  }
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("[%H:%M:%S.%e " + node_name + "] %^%v%$");
  auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off")
    throw Error("unknown log level '" + level + "', expected trace, debug, info, warn or error");
  spdlog::set_level(lvl);
}

}  // namespace psbed
