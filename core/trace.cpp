#include "core/trace.hpp"

#include <time.h>
#include <unistd.h>

#include <algorithm>
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

std::string clock_domain() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
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

bool is_transfer_lane(const std::string& lane) {
  return lane == "push" || lane == "pull" || lane == "h2d" || lane == "d2h";
}

std::uint64_t transfer_flow_id(std::int64_t worker, std::int64_t key, std::int64_t part,
                               std::int64_t offset_floats, std::int64_t clock) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the five numbers
  for (const std::int64_t v : {worker, key, part, offset_floats, clock})
    for (int b = 0; b < 8; ++b) h = (h ^ ((std::uint64_t(v) >> (8 * b)) & 0xff)) * 1099511628211ull;
  return (h & ((std::uint64_t(1) << 52) - 1)) | 1;
}

void TraceRecorder::counter(const std::string& name, const std::string& series, double ts_us,
                            double value) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  counters_.push_back({name, series, ts_us, value});
}

namespace {

nlohmann::json event_args(const TraceEvent& e) {
  nlohmann::json args = nlohmann::json::object();
  if (e.step >= 0) args["step"] = e.step;
  if (e.bytes >= 0) args["bytes"] = e.bytes;
  if (e.key >= 0) args["key"] = e.key;
  if (e.part >= 0) args["part"] = e.part;
  if (e.has_priority) args["priority"] = e.priority;
  if (!e.note.empty()) args["note"] = e.note;
  return args;
}

// Perfetto's flow form 2: the id on the event itself, bound to the slice it starts.
void add_flow(nlohmann::json& j, const TraceEvent& e) {
  if (e.flow == 0) return;
  j["bind_id"] = e.flow;
  if (e.flow_in) j["flow_in"] = true;
  if (e.flow_out) j["flow_out"] = true;
}

// Threads of one process: a lane's events go to the first of its threads where they start after
// the last one ended or nest inside it, so that no two slices of a thread overlap otherwise.
class LaneThreads {
 public:
  LaneThreads(std::int64_t pid, nlohmann::json& out) : pid_(pid), out_(out) {}
  int place(const TraceEvent& e) {
    auto& threads = lanes_[e.lane];
    const double end = e.ts_us + e.dur_us;
    for (Thread& t : threads) {
      while (!t.open.empty() && t.open.back() <= e.ts_us) t.open.pop_back();
      if (t.open.empty() || end <= t.open.back()) {
        t.open.push_back(end);
        return t.tid;
      }
    }
    threads.push_back({next_tid_++, {end}});
    out_.push_back({{"ph", "M"},
                    {"name", "thread_name"},
                    {"pid", pid_},
                    {"tid", threads.back().tid},
                    {"args", {{"name", e.lane}}}});
    return threads.back().tid;
  }

 private:
  struct Thread {
    int tid;
    std::vector<double> open;  // ends of the slices open at the last start, outermost first
  };
  std::int64_t pid_;
  nlohmann::json& out_;
  std::map<std::string, std::vector<Thread>> lanes_;
  int next_tid_ = 1;
};

// "bytes in flight", one series per transfer lane, stepped at every start and end.
void add_in_flight_counters(const std::vector<TraceEvent>& events, std::int64_t pid,
                            nlohmann::json& out) {
  std::map<std::string, std::vector<std::pair<double, double>>> changes;
  for (const auto& e : events)
    if (is_transfer_lane(e.lane) && e.bytes > 0) {
      changes[e.lane].push_back({e.ts_us, double(e.bytes)});
      changes[e.lane].push_back({e.ts_us + e.dur_us, -double(e.bytes)});
    }
  for (auto& [lane, c] : changes) {
    std::sort(c.begin(), c.end());
    double level = 0;
    for (std::size_t i = 0; i < c.size(); ++i) {
      level += c[i].second;
      if (i + 1 < c.size() && c[i + 1].first == c[i].first) continue;  // one sample per moment
      out.push_back({{"ph", "C"},
                     {"name", "bytes in flight"},
                     {"pid", pid},
                     {"ts", c[i].first},
                     {"args", {{lane, std::max(0.0, level)}}}});
    }
  }
}

}  // namespace

void TraceRecorder::write(const std::string& path) const {
  std::lock_guard<std::mutex> lock(mu_);
  // This node's pid, its own (trace_pid), so that the files of a run dropped into one viewer stay
  // one process each.
  const std::int64_t pid = trace_pid(node_);
  nlohmann::json evs = nlohmann::json::array();
  evs.push_back({{"ph", "M"},
                 {"name", "process_name"},
                 {"pid", pid},
                 {"tid", 0},
                 {"args", {{"name", node_}}}});
  std::vector<TraceEvent> sorted = events_;
  std::stable_sort(sorted.begin(), sorted.end(), [](const TraceEvent& a, const TraceEvent& b) {
    return a.ts_us != b.ts_us ? a.ts_us < b.ts_us : a.dur_us > b.dur_us;  // parents first
  });
  LaneThreads threads(pid, evs);
  std::uint64_t async_id = 0;
  for (const auto& e : sorted) {
    if (is_transfer_lane(e.lane)) {
      const std::string id = std::to_string(++async_id);
      // Process-scoped ids (id2.local): the traces of several nodes merge without clashing.
      nlohmann::json begin = {{"name", e.name},         {"cat", e.lane}, {"ph", "b"},
                              {"id2", {{"local", id}}}, {"pid", pid},    {"tid", 0},
                              {"ts", e.ts_us}};
      begin["args"] = event_args(e);
      add_flow(begin, e);
      evs.push_back(std::move(begin));
      evs.push_back({{"name", e.name},
                     {"cat", e.lane},
                     {"ph", "e"},
                     {"id2", {{"local", id}}},
                     {"pid", pid},
                     {"tid", 0},
                     {"ts", e.ts_us + e.dur_us}});
      continue;
    }
    nlohmann::json x = {{"name", e.name},          {"ph", "X"},     {"pid", pid},
                        {"tid", threads.place(e)}, {"ts", e.ts_us}, {"dur", e.dur_us}};
    x["args"] = event_args(e);
    add_flow(x, e);
    evs.push_back(std::move(x));
  }
  add_in_flight_counters(events_, pid, evs);
  for (const auto& c : counters_)
    evs.push_back({{"ph", "C"},
                   {"name", c.name},
                   {"pid", pid},
                   {"ts", c.ts_us},
                   {"args", {{c.series, c.value}}}});
  nlohmann::json meta = metadata_;
  meta["node"] = node_;
  if (!meta.contains("clock"))
    meta["clock"] = "CLOCK_MONOTONIC microseconds";  // the simulator sets its own
  nlohmann::json doc = {
      {"traceEvents", std::move(evs)}, {"displayTimeUnit", "ms"}, {"metadata", std::move(meta)}};
  write_trace_json(path, doc);
}

void write_trace_json(const std::string& path, const nlohmann::json& doc) {
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

// An async event's id, as either form writes it.
std::string async_id(const nlohmann::json& e) {
  if (const auto id2 = e.find("id2"); id2 != e.end() && id2->is_object() && id2->contains("local"))
    return "local:" + (*id2)["local"].dump();
  return e.contains("id") ? e["id"].dump() : std::string();
}

}  // namespace

nlohmann::json read_trace_json(const std::string& path) { return parse_trace_file(path); }

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
  // Async transfers: the begin holds the event, its end (same category and id) the duration.
  std::map<std::pair<std::string, std::string>, std::size_t> open;
  for (const auto& e : doc["traceEvents"]) {
    const std::string ph = e.value("ph", "");
    if (ph == "e") {
      const auto id = async_id(e);
      if (auto it = open.find({e.value("cat", ""), id}); it != open.end()) {
        TraceEvent& ev = t.events[it->second];
        ev.dur_us = std::max(0.0, e.value("ts", 0.0) - ev.ts_us);
        open.erase(it);
      }
      continue;
    }
    if (ph != "X" && ph != "b") continue;
    TraceEvent ev;
    ev.name = e.value("name", "");
    ev.lane = ph == "b" ? e.value("cat", "") : lanes[e.value("tid", 0)];
    ev.ts_us = e.value("ts", 0.0);
    ev.dur_us = e.value("dur", 0.0);
    if (ph == "b") open[{ev.lane, async_id(e)}] = t.events.size();
    const auto& a = e.contains("args") ? e["args"] : nlohmann::json::object();
    ev.step = a.value("step", std::int64_t(-1));
    ev.bytes = a.value("bytes", std::int64_t(-1));
    ev.key = a.value("key", std::int64_t(-1));
    ev.part = a.value("part", std::int64_t(-1));
    if (a.contains("priority")) ev.priority = a["priority"].get<int>(), ev.has_priority = true;
    ev.note = a.value("note", std::string());
    if (const auto f = e.find("bind_id"); f != e.end() && f->is_number_unsigned()) {
      ev.flow = f->get<std::uint64_t>();
      ev.flow_in = e.value("flow_in", false), ev.flow_out = e.value("flow_out", false);
    }
    t.events.push_back(std::move(ev));
  }
  return t;
}

}  // namespace psbed
