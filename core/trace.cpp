#include "core/trace.hpp"

#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>

#include "core/error.hpp"

namespace psbed {

double now_us() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) * 1e6 + double(ts.tv_nsec) / 1e3;
}

double process_cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) / 1e9;
}

void TraceRecorder::record(TraceEvent e) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back(std::move(e));
}

void TraceRecorder::complete(const std::string& name, const std::string& lane, double start_us,
                             std::int64_t step, std::int64_t bytes, std::int64_t key,
                             std::int64_t part) {
  if (!enabled_) return;
  TraceEvent e;
  e.name = name, e.lane = lane, e.ts_us = start_us, e.dur_us = now_us() - start_us;
  e.step = step, e.bytes = bytes, e.key = key, e.part = part;
  record(std::move(e));
}

void TraceRecorder::set_metadata(const std::string& key, nlohmann::json value) {
  std::lock_guard<std::mutex> lock(mu_);
  metadata_[key] = std::move(value);
}

std::size_t TraceRecorder::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_.size();
}

std::vector<TraceEvent> TraceRecorder::events() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_;
}

std::int64_t trace_pid(const std::string& node) {
  auto numbered = [&](const std::string& role, std::int64_t base) -> std::int64_t {
    if (node.rfind(role, 0) != 0 || node.size() == role.size() || node.size() - role.size() > 6 ||
        node.find_first_not_of("0123456789", role.size()) != std::string::npos)
      return -1;
    return base + std::stoll(node.substr(role.size()));
  };
  if (node == "coordinator") return 1;
  if (const std::int64_t pid = numbered("server-", 1000000); pid >= 0) return pid;
  if (const std::int64_t pid = numbered("worker-", 2000000); pid >= 0) return pid;
  std::uint32_t h = 2166136261u;  // FNV-1a: any other name, the same number every time
  for (const unsigned char c : node) h = (h ^ c) * 16777619u;
  return 3000000 + std::int64_t(h % 1000000000u);
}

void TraceRecorder::write(const std::string& path) const {
  std::lock_guard<std::mutex> lock(mu_);
  // This node's pid, its own (trace_pid), so that the files of a run dropped into one viewer stay
  // one process each; lanes get tids in order of first use, named by metadata events.
  const std::int64_t pid = trace_pid(node_);
  std::map<std::string, int> tids;
  nlohmann::json evs = nlohmann::json::array();
  evs.push_back({{"ph", "M"},
                 {"name", "process_name"},
                 {"pid", pid},
                 {"tid", 0},
                 {"args", {{"name", node_}}}});
  for (const auto& e : events_) {
    auto [it, added] = tids.emplace(e.lane, int(tids.size()) + 1);
    if (added)
      evs.push_back({{"ph", "M"},
                     {"name", "thread_name"},
                     {"pid", pid},
                     {"tid", it->second},
                     {"args", {{"name", e.lane}}}});
    nlohmann::json args = nlohmann::json::object();
    if (e.step >= 0) args["step"] = e.step;
    if (e.bytes >= 0) args["bytes"] = e.bytes;
    if (e.key >= 0) args["key"] = e.key;
    if (e.part >= 0) args["part"] = e.part;
    if (e.has_priority) args["priority"] = e.priority;
    if (!e.note.empty()) args["note"] = e.note;
    evs.push_back({{"name", e.name},
                   {"ph", "X"},
                   {"pid", pid},
                   {"tid", it->second},
                   {"ts", e.ts_us},
                   {"dur", e.dur_us},
                   {"args", std::move(args)}});
  }
  nlohmann::json meta = metadata_;
  meta["node"] = node_;
  if (!meta.contains("clock"))
    meta["clock"] = "CLOCK_MONOTONIC microseconds";  // the simulator sets its own
  nlohmann::json doc = {
      {"traceEvents", std::move(evs)}, {"displayTimeUnit", "ms"}, {"metadata", std::move(meta)}};
  // Written beside it and renamed into place: a node killed while writing (launch sends SIGKILL
  // to what a SIGTERM has not stopped in time) leaves no half-written trace.
  const std::string partial = path + ".partial-" + std::to_string(::getpid());
  {
    std::ofstream out(partial);
    if (!out) throw Error("cannot write trace file '" + path + "'");
    out << doc.dump() << "\n";
    out.flush();
    if (!out) {
      std::remove(partial.c_str());
      throw Error("writing trace file '" + path + "' failed");
    }
  }
  if (std::rename(partial.c_str(), path.c_str()) != 0) {
    std::remove(partial.c_str());
    throw Error("cannot write trace file '" + path + "'");
  }
}

namespace {

// A trace file parsed (with `keep` deciding, if set, which values are built), its top-level
// "traceEvents" array checked; errors name the file.
nlohmann::json parse_trace_file(const std::string& path,
                                const nlohmann::json::parser_callback_t& keep = nullptr) {
  std::ifstream in(path);
  if (!in) throw Error("trace file '" + path + "' cannot be read");
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in, keep);
  } catch (const nlohmann::json::exception& e) {
    throw Error("trace file '" + path + "' is not JSON: " + e.what());
  }
  if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array())
    throw Error("trace file '" + path + "' has no traceEvents array");
  return doc;
}

}  // namespace

nlohmann::json read_trace_metadata(const std::string& path) {
  // The top-level "traceEvents" array's elements are dropped as they are parsed.
  bool in_events = false;
  auto keep = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    if (depth == 1 && event == nlohmann::json::parse_event_t::key)
      in_events = parsed == "traceEvents";
    return !(in_events && depth == 2 &&
             (event == nlohmann::json::parse_event_t::object_start ||
              event == nlohmann::json::parse_event_t::array_start ||
              event == nlohmann::json::parse_event_t::value));
  };
  return parse_trace_file(path, keep).value("metadata", nlohmann::json::object());
}

LoadedTrace read_trace(const std::string& path) {
  const nlohmann::json doc = parse_trace_file(path);
  LoadedTrace t;
  t.metadata = doc.value("metadata", nlohmann::json::object());
  t.node = t.metadata.value("node", std::string());
  std::map<int, std::string> lanes;
  for (const auto& e : doc["traceEvents"]) {
    if (e.value("ph", "") != "M") continue;
    if (e.value("name", "") == "thread_name")
      lanes[e.value("tid", 0)] = e["args"].value("name", "");
    if (e.value("name", "") == "process_name" && t.node.empty())
      t.node = e["args"].value("name", "");
  }
  for (const auto& e : doc["traceEvents"]) {
    if (e.value("ph", "") != "X") continue;
    TraceEvent ev;
    ev.name = e.value("name", "");
    ev.lane = lanes[e.value("tid", 0)];
    ev.ts_us = e.value("ts", 0.0);
    ev.dur_us = e.value("dur", 0.0);
    const auto& a = e.contains("args") ? e["args"] : nlohmann::json::object();
    ev.step = a.value("step", std::int64_t(-1));
    ev.bytes = a.value("bytes", std::int64_t(-1));
    ev.key = a.value("key", std::int64_t(-1));
    ev.part = a.value("part", std::int64_t(-1));
    if (a.contains("priority")) ev.priority = a["priority"].get<int>(), ev.has_priority = true;
    ev.note = a.value("note", std::string());
    t.events.push_back(std::move(ev));
  }
  return t;
}

}  // namespace psbed
