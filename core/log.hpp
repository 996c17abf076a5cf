// Human progress goes to stderr through spdlog; machine results go to JSON files.
#pragma once
#include <string>

namespace psbed {

// Sets the process-wide stderr logger: "[12:00:01.234 worker-3] message". `level` is one of
// trace, debug, info, warn, error. `file`, if given: every line goes to it as well (made afresh,
// each line flushed as it is written).
void setup_logging(const std::string& node_name, const std::string& level = "info",
                   const std::string& file = "");

}  // namespace psbed
