// The fast mode (SimConfig::fidelity): groups of identical workers against every worker
// simulated, on cases whose answer is known by hand and on random small configurations.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <random>

#include "core/model_spec.hpp"
#include "core/profile.hpp"
#include "predictor/simulator.hpp"
#include "tests/predictor/sim_test_util.hpp"

using namespace psbed;
using namespace psbed::predictor;
using namespace psbed::predictor::test;

namespace {

SimConfig fast(SimConfig c, int groups) {
  c.fidelity = Fidelity::kFast;
  c.groups = groups;
  return c;
}

}  // namespace

TEST_CASE("fast mode: one worker is simulated as itself", "[predictor][fast]") {
  const ModelSpec spec = parse_model_spec(kTiny, "tiny");
  const Profile p = fixed_profile(spec);
  const SimResult r = simulate(p, spec, fast(config(1), 1));
  CHECK(r.simulated_workers == 1);
  CHECK(r.steps_per_sec == Approx(1 / kOneWorkerStep).epsilon(1e-9));
}

TEST_CASE("fast mode: N identical workers share the shard's link as N", "[predictor][fast]") {
  const ModelSpec spec = parse_model_spec(kTiny, "tiny");
  const Profile p = fixed_profile(spec);
  // Fair links: the N pulls leave the server at 1/N of its rate each (N ms), the N pushes enter
  // it alike (N ms): step = 4 L + 2N ms + 5 ms, whether each worker is simulated or a group
  // stands for several.
  const int n = 8;
  const double step = 0.0004 + 0.002 * n + 0.005;
  SimConfig c = config(n);
  c.link_model = LinkModel::kFair;
  for (int groups : {8, 4, 2, 1}) {
    INFO(groups << " group(s)");
    const SimResult r = simulate(p, spec, fast(c, groups));
    CHECK(r.simulated_workers == groups);
    REQUIRE(r.worker_steps_per_sec.size() == std::size_t(n));
    for (double sps : r.worker_steps_per_sec) CHECK(sps == Approx(1 / step).epsilon(1e-9));
    CHECK(r.steps_per_sec == Approx(n / step).epsilon(1e-9));
  }
  // Groups as even as they can be: 8 workers in 3 groups of 3, 3 and 2.
  CHECK(simulate(p, spec, fast(c, 3)).steps_per_sec == Approx(n / step).epsilon(1e-9));
}

TEST_CASE("fast mode: the bsp barrier holds every group to the straggler's pace",
          "[predictor][fast]") {
  const ModelSpec spec = parse_model_spec(kTiny, "tiny");
  const Profile p = fixed_profile(spec);
  SimConfig c = config(6);
  c.bandwidth_bytes_per_sec = 0;  // unlimited links
  c.latency_s = 0;
  c.straggler_s = 0.005;  // worker-0 sleeps 5 ms a step: alone in its group
  c.steps = 30;
  const SimResult bsp = simulate(p, spec, fast(c, 2));
  CHECK(bsp.simulated_workers == 2);
  for (double sps : bsp.worker_steps_per_sec) CHECK(sps == Approx(100).epsilon(1e-6));
  // A slower worker by --straggler keeps its place in the figures, alone in its group: compute
  // 10 ms a step, and the others wait for it.
  c.straggler_s = 0;
  c.stragglers = {Straggler{3, 2.0, 0}};  // worker-3's compute twice as long
  const SimResult slow = simulate(p, spec, fast(c, 2));
  CHECK(slow.simulated_workers == 2);
  for (double sps : slow.worker_steps_per_sec) CHECK(sps == Approx(100).epsilon(1e-6));
}

TEST_CASE("fast mode: every worker simulated where a group cannot stand for its members",
          "[predictor][fast]") {
  const ModelSpec spec = parse_model_spec(kTiny, "tiny");
  const Profile p = fixed_profile(spec);
  // The host's cores: a group's compute would queue on one core.
  SimConfig cores = fast(host_config(4, 2, 10e-6), 2);
  cores.mode = Consistency::parse("bsp");
  CHECK(simulate(p, spec, cores).simulated_workers == 4);
  // Traces are one per worker: every draw of a traced configuration, not only the traced one.
  const auto dir = std::filesystem::temp_directory_path() / "psbed-fast-traces";
  std::filesystem::remove_all(dir);
  SimConfig traced = fast(config(4), 2);
  traced.trace_dir = dir.string();
  CHECK(simulate_seeds(p, spec, traced, 3).simulated_workers == 4);
  CHECK(std::filesystem::exists(dir / "worker-3.trace.json"));
  std::filesystem::remove_all(dir);
  // Outside bsp nothing holds a group's members in step.
  for (const char* mode : {"async", "ssp:2"})
    CHECK(simulate(p, spec, fast(config(4, mode), 2)).simulated_workers == 4);
  // Auto: fast only above kFastAbove workers.
  SimConfig small = config(4);
  small.fidelity = Fidelity::kAuto;
  small.groups = 2;
  CHECK(simulate(p, spec, small).simulated_workers == 4);
  SimConfig big = config(kFastAbove + 1);
  big.fidelity = Fidelity::kAuto;
  big.groups = 2;
  big.steps = 5;
  CHECK(simulate(p, spec, big).simulated_workers == 2);
}

// Within 5%: what the grouping holds today on fair links in bsp with two groups or more (its
// figures came out 0-3.6% slow: a group's members send at once, where drawn compute spreads
// real workers' sends). The aim, 2%, is not met; docs/predictor-model.md, "Fast mode".
TEST_CASE("fast mode: random small configurations on fair links agree with exact",
          "[predictor][fast]") {
  const ModelSpec spec = parse_model_spec(kTiny, "tiny");
  const Profile p = varied_profile(spec);
  std::mt19937 g(7);
  const char* policies[] = {"wfbp", "bulk", "p3", "bytescheduler"};
  for (int i = 0; i < 24; ++i) {
    SimConfig c = config(2 + int(g() % 11));
    c.policy.name = policies[g() % 4];
    c.link_model = LinkModel::kFair;
    c.servers = 1 + int(g() % 2);
    c.steps = 60;
    c.seed = g();
    const int groups = 2 + int(g() % std::uint32_t(c.workers - 1));
    const SimResult exact = simulate(p, spec, c);
    const SimResult quick = simulate(p, spec, fast(c, groups));
    INFO(c.workers << " workers in " << groups << " groups, " << c.servers << " shard(s), "
                   << c.policy.name << ", " << c.mode.str());
    CHECK(quick.images_per_sec == Approx(exact.images_per_sec).epsilon(0.05));
  }
}

// simulate_seeds checks a grouped figure: its median seed again with half and with twice the
// groups (here 8: every worker), the larger move kept.
TEST_CASE("fast mode: the median seed checked with half and twice the groups",
          "[predictor][fast]") {
  const ModelSpec spec = parse_model_spec(kTiny, "tiny");
  const Profile p = varied_profile(spec);
  SimConfig c = fast(config(8), 4);
  c.steps = 40;
  const SimResult r = simulate_seeds(p, spec, c, 3);
  REQUIRE(r.simulated_workers == 4);
  double most = 0;
  for (int groups : {2, 8}) {
    SimConfig other = c;
    other.seed = r.seed, other.policy.seed = c.policy.seed + (r.seed - c.seed);
    other.groups = groups;
    const double moved = 100 * (simulate(p, spec, other).images_per_sec / r.images_per_sec - 1);
    if (std::abs(moved) > std::abs(most)) most = moved;
  }
  CHECK(most != 0);
  CHECK(r.fast_check_pct == Approx(most));
  // Not grouped: nothing to check.
  CHECK(simulate_seeds(p, spec, config(8), 3).fast_check_pct == 0);
}

// Under a credit the finer grouping has at most kCheckMembers workers a group and runs for fewer
// steps, set against the checked groups at as many steps; without a credit it is twice the groups.
// On config()'s fair links: the mechanism, not the bucket links' miss it is there for.
TEST_CASE("fast mode: under a credit the check's finer groups hold at most 8 workers",
          "[predictor][fast]") {
  const ModelSpec spec = parse_model_spec(kTiny, "tiny");
  const Profile p = varied_profile(spec);
  // One group: the coarser grouping is the same one (no move), so the figure reported is the
  // finer grouping's move, at `steps` against one group at as many.
  SimConfig c = fast(config(40), 1);
  c.steps = 400;
  c.policy.name = "p3";
  c.policy.slice_params = 20;
  c.policy.credit_bytes = 64;
  // `warmup` >= 0: the warm-up both runs take, in steps.
  const auto fine_move = [&](const SimConfig& c, int groups, std::int64_t steps,
                             std::int64_t warmup = -1) {
    SimConfig fine = c, same = c;
    fine.groups = groups, fine.steps = same.steps = steps;
    if (warmup >= 0) fine.warmup_steps = same.warmup_steps = warmup;
    return 100 *
           (simulate(p, spec, fine).images_per_sec / simulate(p, spec, same).images_per_sec - 1);
  };
  // 40 workers for 400 steps: 5 groups of 8 (not 2 of 20), for 400 x 1 / 5 = 80 steps.
  CHECK(fast_check_groups(c) == std::pair<int, int>{1, 5});
  const SimResult r = simulate_seeds(p, spec, c, 1);
  REQUIRE(r.simulated_workers == 1);
  const double want = fine_move(c, 5, 80);
  CHECK(want != 0);
  CHECK(r.fast_check_pct == Approx(want));
  // 64 workers for 100 steps: 8 groups of 8 for kCheckSteps (60) steps, not 100 x 1 / 8 = 12.
  SimConfig big = c;
  big.workers = 64, big.steps = 100;
  CHECK(fast_check_groups(big) == std::pair<int, int>{1, 8});
  const SimResult rb = simulate_seeds(p, spec, big, 1);
  const double want_big = fine_move(big, 8, kCheckSteps);
  CHECK(want_big != 0);
  CHECK(rb.fast_check_pct == Approx(want_big));
  // A warm-up given in steps shrinks with them: 40 of 400 steps become 8 of the check's 80.
  SimConfig warm = c;
  warm.warmup_steps = 40;
  const double want_warm = fine_move(warm, 5, 80, 8);
  CHECK(want_warm != 0);
  CHECK(simulate_seeds(p, spec, warm, 1).fast_check_pct == Approx(want_warm));
  // Fewer steps than kCheckSteps: the finer groups run for all of them, set against the answer.
  SimConfig few = c;
  few.steps = 50;
  const SimResult rf = simulate_seeds(p, spec, few, 1);
  SimConfig few_fine = few;
  few_fine.groups = 5;
  CHECK(rf.fast_check_pct ==
        Approx(100 * (simulate(p, spec, few_fine).images_per_sec / rf.images_per_sec - 1)));
  // Stragglers are alone in groups of their own: 40 workers, 2 of them stragglers, give 2 + 5
  // groups (38 workers in groups of at most 8), not 5.
  SimConfig slow = c;
  slow.stragglers = parse_stragglers({"worker-3:compute=2x", "worker-7:compute=2x"});
  CHECK(fast_check_groups(slow) == std::pair<int, int>{1, 7});
  // Without a credit: half and twice the groups.
  c.policy.name = "wfbp";
  c.groups = 2;
  CHECK(fast_check_groups(c) == std::pair<int, int>{1, 4});
}
