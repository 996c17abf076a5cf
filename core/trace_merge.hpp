// One trace for a whole run: the files its nodes wrote, on one clock. A node that shares the
// coordinator's clock (one host: processes, network namespaces, containers) keeps its times; one
// on another host is moved by the offset its registration's round trip measured.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace psbed {

struct MergedTrace {
  nlohmann::json doc;              // {"traceEvents":[...], "metadata":{"nodes":{...}}}
  std::vector<std::string> nodes;  // in the order of the files
  double largest_offset_us = 0;    // the largest |offset| applied (0 on one host)
  int without_sync = 0;            // files whose node recorded no clock offset (kept as they are)
};

// Throws psbed::Error naming the file that cannot be read, or when `paths` is empty.
MergedTrace merge_traces(const std::vector<std::string>& paths);

// The trace files of run folder `run` (its traces/*.trace.json), sorted; throws psbed::Error
// when there are none.
std::vector<std::string> run_trace_files(const std::string& run);

}  // namespace psbed
