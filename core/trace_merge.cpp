#include "core/trace_merge.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/error.hpp"
#include "core/trace.hpp"

namespace psbed {

std::vector<std::string> run_trace_files(const std::string& run) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(run) / "traces";
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw Error("run folder '" + run +
                "' has no traces/ folder (was it launched with --no-trace?)");
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const std::string suffix = ".trace.json";
    if (name.size() > suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      files.push_back(entry.path().string());
  }
  if (files.empty()) throw Error("'" + dir.string() + "' holds no NODE.trace.json file");
  std::sort(files.begin(), files.end());
  return files;
}

MergedTrace merge_traces(const std::vector<std::string>& paths) {
  if (paths.empty()) throw Error("no trace files to merge");
  MergedTrace m;
  nlohmann::json events = nlohmann::json::array();
  nlohmann::json nodes = nlohmann::json::object();
  for (const auto& path : paths) {
    nlohmann::json doc = read_trace_json(path);
    nlohmann::json meta = doc.value("metadata", nlohmann::json::object());
    const std::string node = meta.value("node", path);
    const nlohmann::json sync = meta.value("clock_sync", nlohmann::json());
    double offset = 0;
    if (sync.is_object() && sync.contains("offset_us") && sync["offset_us"].is_number())
      offset = sync["offset_us"].get<double>();
    else
      ++m.without_sync;
    m.largest_offset_us = std::max(m.largest_offset_us, std::fabs(offset));
    for (auto& e : doc["traceEvents"]) {
      if (offset != 0 && e.is_object() && e.contains("ts") && e["ts"].is_number())
        e["ts"] = e["ts"].get<double>() + offset;
      events.push_back(std::move(e));
    }
    nodes[node] = {{"file", path}, {"offset_us", offset}, {"clock_sync", sync}, {"metadata", meta}};
    m.nodes.push_back(node);
  }
  m.doc = {{"traceEvents", std::move(events)},
           {"displayTimeUnit", "ms"},
           {"metadata",
            {{"clock", "the coordinator's CLOCK_MONOTONIC microseconds"}, {"nodes", nodes}}}};
  return m;
}

}  // namespace psbed
