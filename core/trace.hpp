// Traces in the Chrome Trace Event Format, one file per process, openable in Perfetto or
// chrome://tracing. Work on a thread is complete events ("ph":"X") on named lanes; transfers,
// which overlap one another, are async events ("b"/"e" with an id), so that a viewer never sees
// two slices of one thread overlap without nesting. Flows join a push to the shard's apply and
// to the pull that brings the update back. The node name is the process name and each lane a
// thread name (metadata events), so traces of several processes merge by dropping them into one
// Perfetto window. Timestamps are CLOCK_MONOTONIC microseconds, shared by every process on a
// host; nodes on other hosts record their offset to the coordinator's clock (`psbed trace merge`).
//
// Recording is a mutex-protected append of a small struct: a few hundred events a step cost
// far below 1% of a step.
#pragma once
#include <chrono>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace psbed {

// Microseconds on the monotonic clock that every process of a host shares.
double now_us();

// The trace's "pid" of node `node`, distinct per node of a run so that their files dropped into
// one viewer stay apart: coordinator 1, server-K 1000000 + K, worker-K 2000000 + K (a viewer
// lists shards before workers, each in order), any other name a number from a hash of it, at
// 3000000 or more.
std::int64_t trace_pid(const std::string& node);
// Processes that return the same non-empty string read one CLOCK_MONOTONIC (one kernel: the
// boot id, shared by the containers and network namespaces of a host).
std::string clock_domain();
// CPU seconds this process has used so far, every thread, user and system.
double process_cpu_s();

struct TraceEvent {
  std::string name;  // "fwd:conv1", "push:conv1.weight#2"
  std::string lane;  // "compute", "push", "pull", "apply", "control"
  double ts_us = 0, dur_us = 0;
  std::int64_t step = -1, bytes = -1, key = -1, part = -1;
  int priority = 0;
  bool has_priority = false;
  std::string note;  // free text in args.note (e.g. a policy switch)
  // A flow through this event (0: none): the push that starts it, the apply it goes through, the
  // pull that ends it carry the same id (transfer_flow_id).
  std::uint64_t flow = 0;
  bool flow_in = false, flow_out = false;
};

// A sample of a counter track ("bytes queued" with series "push"...).
struct TraceCounter {
  std::string name, series;
  double ts_us = 0, value = 0;
};

// Lanes whose events are transfers in flight together: written as async events.
bool is_transfer_lane(const std::string& lane);

// The id of the flow of worker `worker`'s update of a part's range at `clock`: the same number
// in the worker's and the shard's traces, so that flows join across files. Never 0; below 2^52
// so that every JSON reader keeps it exact.
std::uint64_t transfer_flow_id(std::int64_t worker, std::int64_t key, std::int64_t part,
                               std::int64_t offset_floats, std::int64_t clock);

class TraceRecorder {
 public:
  explicit TraceRecorder(std::string node, bool enabled = true)
      : node_(std::move(node)), enabled_(enabled) {}
  bool enabled() const { return enabled_; }
  const std::string& node() const { return node_; }
  void record(TraceEvent e);
  // Convenience: an event from start to now.
  void complete(const std::string& name, const std::string& lane, double start_us,
                std::int64_t step = -1, std::int64_t bytes = -1, std::int64_t key = -1,
                std::int64_t part = -1);
  void counter(const std::string& name, const std::string& series, double ts_us, double value);
  void set_metadata(const std::string& key, nlohmann::json value);
  std::size_t size() const;
  std::vector<TraceEvent> events() const;
  // Writes {"traceEvents":[...],"displayTimeUnit":"ms","metadata":{...}}: complete events of a
  // lane that overlap without nesting go to a second thread of the same name; transfers are
  // async events; "bytes in flight" counters follow from the transfers.
  void write(const std::string& path) const;

 private:
  std::string node_;
  bool enabled_;
  mutable std::mutex mu_;
  std::vector<TraceEvent> events_;
  std::vector<TraceCounter> counters_;
  nlohmann::json metadata_ = nlohmann::json::object();
};

// Writes a trace document to `path` atomically (beside it, then renamed): errors name the file.
void write_trace_json(const std::string& path, const nlohmann::json& doc);

// A trace file read back: events with their node (process) and lane (thread) names resolved.
struct LoadedTrace {
  std::string node;
  nlohmann::json metadata;
  std::vector<TraceEvent> events;
};
LoadedTrace read_trace(const std::string& path);
// A trace file as JSON, its "traceEvents" array checked; errors name the file.
nlohmann::json read_trace_json(const std::string& path);
// Only a trace file's "metadata" object (the run's link, cluster, policy...): its events are
// read past, not kept, which makes this several times cheaper than read_trace on a long run.
// Throws psbed::Error naming the file as read_trace does.
nlohmann::json read_trace_metadata(const std::string& path);

}  // namespace psbed
