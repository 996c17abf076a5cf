#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/model_spec.hpp"
#include "core/partition.hpp"
#include "core/trace.hpp"

using namespace psbed;

TEST_CASE("a trace round-trips through the Chrome trace format", "[core][trace]") {
  TraceRecorder rec("worker-3");
  TraceEvent e;
  e.name = "push:conv1.weight#2", e.lane = "push", e.ts_us = 100, e.dur_us = 50;
  e.step = 7, e.bytes = 4096, e.key = 0, e.part = 2, e.priority = 1, e.has_priority = true;
  rec.record(e);
  double t0 = now_us();
  rec.complete("fwd:conv1", "compute", t0, 7);
  rec.set_metadata("policy", "wfbp");
  auto path = (std::filesystem::temp_directory_path() / "psbed-trace-test.json").string();
  rec.write(path);
  LoadedTrace t = read_trace(path);
  std::remove(path.c_str());
  CHECK(t.node == "worker-3");
  CHECK(t.metadata["policy"] == "wfbp");
  REQUIRE(t.events.size() == 2);
  CHECK(t.events[0].name == "push:conv1.weight#2");
  CHECK(t.events[0].lane == "push");
  CHECK(t.events[0].bytes == 4096);
  CHECK(t.events[0].part == 2);
  CHECK(t.events[0].priority == 1);
  CHECK(t.events[1].lane == "compute");
  CHECK(t.events[1].step == 7);
  CHECK(t.events[1].dur_us >= 0);
}

TEST_CASE("each node's trace has a pid of its own, its events under it", "[core][trace]") {
  CHECK(trace_pid("coordinator") == 1);
  CHECK(trace_pid("server-0") == 1000000);
  CHECK(trace_pid("server-12") == 1000012);
  CHECK(trace_pid("worker-0") == 2000000);
  CHECK(trace_pid("worker-3") == 2000003);
  // Other names: stable, apart from the numbered ones and from each other.
  CHECK(trace_pid("trainer") == trace_pid("trainer"));
  CHECK(trace_pid("trainer") >= 3000000);
  CHECK(trace_pid("trainer") != trace_pid("trainer2"));
  CHECK(trace_pid("worker-x") >= 3000000);
  CHECK(trace_pid("worker-") >= 3000000);
  // Every event of a written trace carries the node's pid.
  TraceRecorder rec("server-2");
  rec.complete("apply:fc1.weight#0", "apply", now_us(), 1);
  const auto path = (std::filesystem::temp_directory_path() / "psbed-trace-pid-test.json").string();
  rec.write(path);
  nlohmann::json doc = nlohmann::json::parse(std::ifstream(path));
  std::remove(path.c_str());
  REQUIRE(doc["traceEvents"].size() == 3);  // process name, lane name, the event
  for (const auto& e : doc["traceEvents"]) CHECK(e["pid"] == 1000002);
}

TEST_CASE("a trace's metadata alone: the same object, its events read past", "[core][trace]") {
  TraceRecorder rec("worker-0");
  for (int i = 0; i < 50; ++i) rec.complete("fwd:conv" + std::to_string(i), "compute", now_us(), i);
  rec.set_metadata("link", "1.00 Gbit/s, 200 us one way");
  // A nested object and an array, and a key named like the events' array, inside the metadata.
  rec.set_metadata("cluster", {{"slice_params", 40000}, {"workers", 4}, {"traceEvents", {1, 2}}});
  const auto dir = std::filesystem::temp_directory_path();
  const auto path = (dir / "psbed-trace-meta-test.json").string();
  rec.write(path);
  const nlohmann::json meta = read_trace_metadata(path);
  CHECK(meta == read_trace(path).metadata);
  CHECK(meta["cluster"]["slice_params"] == 40000);
  CHECK(meta["cluster"]["traceEvents"] == nlohmann::json({1, 2}));
  CHECK(meta["link"] == "1.00 Gbit/s, 200 us one way");
  std::remove(path.c_str());
  // Errors name the file, as read_trace's do.
  CHECK_THROWS_WITH(read_trace_metadata(path), Catch::Contains("psbed-trace-meta-test.json"));
  const auto bad = (dir / "psbed-trace-meta-bad.json").string();
  for (const char* text : {"{\"metadata\": {}}", "{\"traceEvents\": [1, 2", "[1, 2]"}) {
    { std::ofstream(bad) << text; }
    CHECK_THROWS_WITH(read_trace_metadata(bad), Catch::Contains("psbed-trace-meta-bad.json"));
  }
  std::remove(bad.c_str());
}

TEST_CASE("a disabled recorder records nothing", "[core][trace]") {
  TraceRecorder rec("server-0", false);
  rec.complete("apply:x", "apply", now_us());
  CHECK(rec.size() == 0);
}

TEST_CASE("tensors are cut into bounded parts balanced across shards", "[core][partition]") {
  ModelSpec m = load_model("vgg-mini");
  const std::int64_t max_bytes = 4 << 20;
  for (int shards : {1, 2, 3}) {
    PartitionPlan p = make_partition(m, max_bytes, shards);
    std::int64_t total = 0;
    for (int k = 0; k < int(m.tensors.size()); ++k) {
      std::int64_t covered = 0;
      for (int idx : p.parts_of_key[k]) {
        const Part& part = p.parts[idx];
        CHECK(part.bytes() <= max_bytes);
        CHECK(part.offset == covered);  // contiguous, in order
        covered += part.numel;
        CHECK(part.shard >= 0);
        CHECK(part.shard < shards);
      }
      CHECK(covered == m.tensors[k].numel);
      total += covered * 4;
    }
    std::int64_t sum = 0;
    for (auto b : p.shard_bytes) sum += b;
    CHECK(sum == total);
    // fc1.weight (16 MiB) alone is 4 parts of 4 MiB: two shards can split the model evenly.
    if (shards == 2) CHECK(p.imbalance() < 1.05);
  }
  PartitionPlan one = make_partition(m, max_bytes, 1);
  CHECK(one.parts_of_key[12].size() == 4);  // fc1.weight: 4096 x 1024 floats = 16 MiB
}
