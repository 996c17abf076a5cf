// The simulator's replicated shards (SimConfig::replicas): the forward to the backup on the
// primary's link, the backup's apply, and the ack held until the backup's answer.
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "core/error.hpp"
#include "core/model_spec.hpp"
#include "core/profile.hpp"
#include "core/trace.hpp"
#include "predictor/simulator.hpp"
#include "tests/predictor/sim_test_util.hpp"

using namespace psbed;
using namespace psbed::predictor;
using namespace psbed::predictor::test;

namespace {

// kTiny on two shards: the weight part (3,984 bytes) on shard 0, backed up on shard 1; the bias
// part (16 bytes) on shard 1, backed up on shard 0.
SimConfig two_shards(int workers, const std::string& mode, int replicas) {
  SimConfig c = config(workers, mode);
  c.servers = 2;
  c.replicas = replicas;
  return c;
}

// The server's trace events of the given lane and name prefix, in `dir`.
int count_events(const std::string& file, const std::string& lane, const std::string& prefix) {
  int n = 0;
  for (const auto& e : read_trace(file).events) n += e.lane == lane && e.name.rfind(prefix, 0) == 0;
  return n;
}

}  // namespace

TEST_CASE("one worker, two shards: a push's ack comes one forward + backup apply + latency later",
          "[predictor][simulator][replicas]") {
  const ModelSpec spec = parse_model_spec(kTiny, "tiny");
  // 0.5 ns per byte: the weight part applies in 1.992 us, on its primary and on its backup.
  const Profile p = fixed_profile(spec, 0.5);
  for (const char* mode : {"async", "bsp", "ssp:1"}) {
    INFO(mode);
    const SimResult one = simulate(p, spec, two_shards(1, mode, 1));
    const SimResult two = simulate(p, spec, two_shards(1, mode, 2));
    // The weight's ack is the last: its forward crosses shard 0's uplink and shard 1's downlink
    // (3,984 bytes at 4e6 bytes/s), one latency, shard 1 applies it, its answer takes one more
    // latency. The bias's forward (16 bytes) enters shard 0's downlink while the weight's push
    // still does: it delays the push by its 16 bytes.
    const double extra = 4000 / 4e6 + 100e-6 + 3984 * 0.5e-9 + 100e-6;
    CHECK(1 / two.steps_per_sec == Approx(1 / one.steps_per_sec + extra).epsilon(1e-9));
  }
}

TEST_CASE("replicas 1 and one shard: the simulation is the same as without the setting",
          "[predictor][simulator][replicas]") {
  const ModelSpec spec = parse_model_spec(kTiny, "tiny");
  const Profile p = varied_profile(spec);
  for (const LinkModel link : {LinkModel::kFair, LinkModel::kBucket}) {
    SimConfig base = config(3, "bsp");
    base.servers = 2;
    base.link_model = link;
    SimConfig same = base;
    same.replicas = 1;
    const SimResult a = simulate(p, spec, base), b = simulate(p, spec, same);
    CHECK(a.images_per_sec == b.images_per_sec);
    CHECK(a.events == b.events);
    // One shard has no other to keep a copy on (launch refuses it; the shard replicates nothing).
    SimConfig lone = config(3, "bsp");
    lone.link_model = link;
    SimConfig lone2 = lone;
    lone2.replicas = 2;
    const SimResult c = simulate(p, spec, lone), d = simulate(p, spec, lone2);
    CHECK(c.images_per_sec == d.images_per_sec);
    CHECK(c.events == d.events);
  }
}

TEST_CASE("every mode forwards each push to the backup", "[predictor][simulator][replicas]") {
  const ModelSpec spec = parse_model_spec(kTiny, "tiny");
  const Profile p = fixed_profile(spec);
  const auto dir = std::filesystem::temp_directory_path() / "psbed-sim-replica-test";
  for (const LinkModel link : {LinkModel::kFair, LinkModel::kBucket}) {
    for (const char* mode : {"bsp", "async"}) {
      INFO(mode << (link == LinkModel::kFair ? " fair" : " bucket"));
      SimConfig c = two_shards(3, mode, 2);
      c.link_model = link;
      c.steps = 4;
      c.trace_dir = dir.string();
      std::filesystem::remove_all(dir);
      simulate(p, spec, c);
      // Shard 1 backs up shard 0's weight part: each worker's push, in bsp too (a push is
      // acknowledged once the backup has it, never once its clock is complete); its own applies
      // are the bias part's, one per push.
      const std::string s1 = (dir / "server-1.trace.json").string();
      CHECK(count_events(s1, "apply", "replicate:fc1.weight#0") == 3 * 4);
      CHECK(count_events(s1, "apply", "apply:fc1.bias#0") == 3 * 4);
      const std::string s0 = (dir / "server-0.trace.json").string();
      CHECK(count_events(s0, "apply", "replicate:fc1.bias#0") == 3 * 4);
    }
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("the forward shares the primary's uplink: a slower link costs more per copy",
          "[predictor][simulator][replicas]") {
  const ModelSpec spec = parse_model_spec(kTiny, "tiny");
  const Profile p = fixed_profile(spec);
  // The copy's cost is the forward's bytes at the link rate (and the bias's forward sharing shard
  // 0's downlink with the weight's push), and two latencies.
  const auto cost = [&](double bw) {
    SimConfig one = two_shards(1, "async", 1), two = two_shards(1, "async", 2);
    one.bandwidth_bytes_per_sec = two.bandwidth_bytes_per_sec = bw;
    return 1 / simulate(p, spec, two).steps_per_sec - 1 / simulate(p, spec, one).steps_per_sec;
  };
  CHECK(cost(4e6) == Approx(4000 / 4e6 + 200e-6).epsilon(1e-9));
  CHECK(cost(2e6) == Approx(4000 / 2e6 + 200e-6).epsilon(1e-9));
}

TEST_CASE("bad replica settings are named", "[predictor][simulator][replicas]") {
  const ModelSpec spec = parse_model_spec(kTiny, "tiny");
  const Profile p = fixed_profile(spec);
  SimConfig c = two_shards(1, "async", 3);
  CHECK_THROWS_WITH(simulate(p, spec, c), Catch::Contains("replicas must be 1 or 2"));
}
