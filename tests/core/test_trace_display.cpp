// The trace writer's display rules: overlapping work of one lane on threads of its own,
// transfers as async pairs, flows and counters; and a run's traces merged on one clock.
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "core/trace.hpp"
#include "core/trace_merge.hpp"

using namespace psbed;

namespace {

TraceEvent event(const std::string& name, const std::string& lane, double ts, double dur) {
  TraceEvent e;
  e.name = name, e.lane = lane, e.ts_us = ts, e.dur_us = dur;
  return e;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / name).string();
}

}  // namespace

TEST_CASE("slices of one lane that overlap go to a second thread of the lane's name",
          "[core][trace]") {
  TraceRecorder rec("server-0");
  rec.record(event("apply:a", "apply", 0, 100));
  rec.record(event("apply:b", "apply", 50, 100));  // overlaps a without nesting
  rec.record(event("apply:c", "apply", 60, 10));   // nests in b... or a: either is fine
  rec.record(event("apply:d", "apply", 200, 10));  // after both: back on the first thread
  const std::string path = temp_path("psbed-trace-threads.json");
  rec.write(path);
  std::ifstream in(path);
  const auto doc = nlohmann::json::parse(in);
  std::map<std::string, int> tid;
  int threads_named_apply = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "X") tid[e["name"]] = e["tid"];
    if (e["ph"] == "M" && e["name"] == "thread_name")
      threads_named_apply += e["args"]["name"] == "apply";
  }
  CHECK(threads_named_apply == 2);
  CHECK(tid["apply:a"] != tid["apply:b"]);
  CHECK(tid["apply:d"] == tid["apply:a"]);
  const LoadedTrace t = read_trace(path);
  std::remove(path.c_str());
  REQUIRE(t.events.size() == 4);
  for (const auto& e : t.events) CHECK(e.lane == "apply");  // read back as one lane
}

TEST_CASE("transfers are async begin/end pairs with flows, and read back whole", "[core][trace]") {
  TraceRecorder rec("worker-1");
  TraceEvent push = event("push:fc.weight#0", "push", 10, 40);
  push.bytes = 4000, push.step = 3, push.flow = transfer_flow_id(1, 2, 0, 0, 3),
  push.flow_out = true;
  TraceEvent pull = event("pull:fc.weight#0", "pull", 20, 40);  // in flight with the push
  pull.bytes = 4000, pull.step = 4, pull.flow = push.flow, pull.flow_in = true;
  rec.record(push);
  rec.record(pull);
  const std::string path = temp_path("psbed-trace-async.json");
  rec.write(path);
  std::ifstream in(path);
  const auto doc = nlohmann::json::parse(in);
  int begins = 0, ends = 0, x = 0;
  double most_in_flight = 0;
  for (const auto& e : doc["traceEvents"]) {
    begins += e["ph"] == "b", ends += e["ph"] == "e", x += e["ph"] == "X";
    if (e["ph"] == "b" && e["cat"] == "push") {
      CHECK(e["bind_id"] == push.flow);
      CHECK(e["flow_out"] == true);
      CHECK(e["id2"].contains("local"));
    }
    if (e["ph"] == "C" && e["name"] == "bytes in flight" && e["args"].contains("push"))
      most_in_flight = std::max(most_in_flight, e["args"]["push"].get<double>());
  }
  CHECK(begins == 2);
  CHECK(ends == 2);
  CHECK(x == 0);
  CHECK(most_in_flight == 4000);
  const LoadedTrace t = read_trace(path);
  std::remove(path.c_str());
  REQUIRE(t.events.size() == 2);
  CHECK(t.events[0].lane == "push");
  CHECK(t.events[0].dur_us == Approx(40));
  CHECK(t.events[0].flow == push.flow);
  CHECK(t.events[1].lane == "pull");
  CHECK(t.events[1].flow_in);
}

TEST_CASE("a flow id is the same for the same update and never 0", "[core][trace]") {
  CHECK(transfer_flow_id(1, 2, 3, 0, 7) == transfer_flow_id(1, 2, 3, 0, 7));
  CHECK(transfer_flow_id(1, 2, 3, 0, 7) != transfer_flow_id(0, 2, 3, 0, 7));
  CHECK(transfer_flow_id(1, 2, 3, 0, 7) != transfer_flow_id(1, 2, 3, 4096, 7));
  CHECK(transfer_flow_id(1, 2, 3, 0, 7) != transfer_flow_id(1, 2, 3, 0, 8));
  CHECK(transfer_flow_id(0, 0, 0, 0, 0) != 0);
  CHECK(transfer_flow_id(5, 6, 7, 8, 9) < (std::uint64_t(1) << 52));
}

TEST_CASE("merged traces move a node on another clock by its offset, not one on the same",
          "[core][trace]") {
  const std::filesystem::path run = std::filesystem::temp_directory_path() / "psbed-merge-run";
  std::filesystem::remove_all(run);
  std::filesystem::create_directories(run / "traces");
  TraceRecorder here("worker-0"), there("server-0");
  here.record(event("fwd:conv1", "compute", 1000, 10));
  there.record(event("apply:a", "apply", 1000, 10));
  here.set_metadata("clock_sync", {{"offset_us", 0.0}, {"rtt_us", 80.0}, {"same_clock", true}});
  there.set_metadata("clock_sync", {{"offset_us", 500.0}, {"rtt_us", 90.0}, {"same_clock", false}});
  here.write((run / "traces" / "worker-0.trace.json").string());
  there.write((run / "traces" / "server-0.trace.json").string());
  const MergedTrace m = merge_traces(run_trace_files(run.string()));
  CHECK(m.nodes == std::vector<std::string>{"server-0", "worker-0"});
  CHECK(m.largest_offset_us == 500);
  CHECK(m.without_sync == 0);
  std::map<std::string, double> ts;
  for (const auto& e : m.doc["traceEvents"])
    if (e["ph"] == "X") ts[e["name"]] = e["ts"];
  CHECK(ts["fwd:conv1"] == 1000);
  CHECK(ts["apply:a"] == 1500);
  std::filesystem::remove_all(run / "traces");
  CHECK_THROWS_AS(run_trace_files(run.string()), Error);
  std::filesystem::remove_all(run);
}
