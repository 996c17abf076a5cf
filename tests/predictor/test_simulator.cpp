#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

#include "core/error.hpp"
#include "core/model_spec.hpp"
#include "core/partition.hpp"
#include "core/profile.hpp"
#include "core/trace.hpp"
#include "predictor/analytic.hpp"
#include "predictor/commands.hpp"
#include "predictor/simulator.hpp"
#include "tests/predictor/sim_test_util.hpp"

using namespace psbed;
using namespace psbed::predictor;
using namespace psbed::predictor::test;

TEST_CASE(
    "one worker, one link: step = compute + model both ways at link rate + four one-way latencies",
    "[predictor][simulator]") {
  const ModelSpec spec = parse_model_spec(kTiny, "tiny");
  REQUIRE(spec.parameter_bytes() == 4000);
  const Profile p = fixed_profile(spec);
  const double step = kOneWorkerStep;
  for (const char* pol : {"wfbp", "bulk", "p3", "bytescheduler", "tf-random"}) {
    SimConfig c = config(1);
    c.policy.name = pol;
    const SimResult r = simulate(p, spec, c);
    INFO(pol);
    CHECK(r.steps_per_sec == Approx(1 / step).epsilon(1e-9));
    CHECK(r.images_per_sec == Approx(8 / step).epsilon(1e-9));
  }
}

TEST_CASE("wire overhead and apply cost add to the step", "[predictor][simulator]") {
  const ModelSpec spec = parse_model_spec(kTiny, "tiny");
  // 0.5 ns per byte: the weight part applies in 1.992 us, the bias part in 0.008 us.
  const Profile p = fixed_profile(spec, 0.5);
  SimConfig c = config(1);
  c.message_overhead_bytes = 1000;  // two parts each way: 2,000 extra bytes = 0.5 ms per direction
  c.apply_lanes = 1;                // one lane: the two applies run one after the other
  const double step = 0.0004 + 0.005 + 2 * (6000 / 4e6);
  // Apply: the weight part arrives first and applies while the bias part is still on the wire
  // (1,016 bytes take 0.254 ms > 1.992 us), so only the bias part's 0.008 us adds.
  const SimResult r = simulate(p, spec, c);
  CHECK(1 / r.steps_per_sec == Approx(step + 16 * 0.5e-9).epsilon(1e-9));
}

TEST_CASE("two workers share the server's link max-min fairly", "[predictor][simulator]") {
  const ModelSpec spec = parse_model_spec(kTiny, "tiny");
  const Profile p = fixed_profile(spec);
  // Both pulls leave the server at once at half the rate each (2 ms), both pushes enter it at
  // half the rate each (2 ms): step = 4 L + 4 ms + 5 ms.
  const double step = 0.0004 + 0.004 + 0.005;
  const SimResult r = simulate(p, spec, config(2));
  REQUIRE(r.worker_steps_per_sec.size() == 2);
  CHECK(r.worker_steps_per_sec[0] == Approx(1 / step).epsilon(1e-9));
  CHECK(r.worker_steps_per_sec[1] == Approx(1 / step).epsilon(1e-9));
  CHECK(r.steps_per_sec == Approx(2 / step).epsilon(1e-9));

  // With two shards the parts split (weight on shard 0, bias on shard 1): only the 16-byte bias
  // moves off shard 0's link, so the figure lies between the one-shard step and a step whose
  // transfers share nothing.
  SimConfig two = config(2);
  two.servers = 2;
  const SimResult r2 = simulate(p, spec, two);
  CHECK(r2.steps_per_sec >= r.steps_per_sec * (1 - 1e-9));
  CHECK(r2.steps_per_sec <= 2 / (0.0004 + 0.002 + 0.005) * (1 + 1e-9));
}

TEST_CASE("bsp holds every worker to the straggler's pace; async does not",
          "[predictor][simulator]") {
  const ModelSpec spec = parse_model_spec(kTiny, "tiny");
  const Profile p = fixed_profile(spec);
  SimConfig c = config(2);
  c.bandwidth_bytes_per_sec = 0;  // unlimited links
  c.latency_s = 0;
  c.straggler_s = 0.005;  // worker-0 sleeps 5 ms a step
  c.steps = 30;
  const SimResult bsp = simulate(p, spec, c);
  // Compute 5 ms, straggle 5 ms: in bsp both run at worker-0's 10 ms.
  CHECK(bsp.worker_steps_per_sec[0] == Approx(100).epsilon(1e-9));
  CHECK(bsp.worker_steps_per_sec[1] == Approx(100).epsilon(1e-6));
  c.mode = Consistency::parse("async");
  const SimResult async = simulate(p, spec, c);
  CHECK(async.worker_steps_per_sec[0] == Approx(100).epsilon(1e-9));
  CHECK(async.worker_steps_per_sec[1] == Approx(200).epsilon(1e-9));
  // ssp:2 lets worker-1 run ahead only two clocks: over a long run it keeps worker-0's pace.
  c.mode = Consistency::parse("ssp:2");
  c.steps = 200;
  const SimResult ssp = simulate(p, spec, c);
  CHECK(ssp.worker_steps_per_sec[1] < 110);
  CHECK(ssp.worker_steps_per_sec[1] > 95);
}

TEST_CASE("a seeded simulation is reproducible", "[predictor][simulator]") {
  const ModelSpec spec = load_model("lenet5");
  Profile p = varied_profile(spec);
  p.apply_ns_per_byte = 0.3;
  SimConfig c;
  c.workers = 3;
  c.mode = Consistency::parse("async");
  c.policy.name = "tf-random";
  c.bandwidth_bytes_per_sec = 1.25e7;
  c.latency_s = 50e-6;
  c.steps = 50;
  c.seed = 7;
  const SimResult a = simulate(p, spec, c), b = simulate(p, spec, c);
  CHECK(a.steps_per_sec == b.steps_per_sec);
  CHECK(a.events == b.events);
  CHECK(a.worker_steps_per_sec == b.worker_steps_per_sec);
  c.seed = 8;
  const SimResult other = simulate(p, spec, c);
  CHECK(other.steps_per_sec != a.steps_per_sec);
}

TEST_CASE("several seeds: the prediction is the run with the median images/s",
          "[predictor][simulator]") {
  const ModelSpec spec = load_model("lenet5");
  Profile p = varied_profile(spec);
  SimConfig c;
  c.workers = 2;
  c.mode = Consistency::parse("async");
  c.policy.name = "tf-random";
  c.bandwidth_bytes_per_sec = 1.25e7;
  c.steps = 30;
  c.seed = 7, c.policy.seed = 7;
  std::vector<double> each;
  std::uint64_t events = 0;
  for (std::uint64_t k = 0; k < 3; ++k) {
    SimConfig one = c;
    one.seed += k, one.policy.seed += k;
    const SimResult r = simulate(p, spec, one);
    each.push_back(r.images_per_sec);
    events += r.events;
  }
  // Two seeds: the lower of the two middle ones, i.e. the smaller.
  CHECK(simulate_seeds(p, spec, c, 2).images_per_sec == std::min(each[0], each[1]));
  std::sort(each.begin(), each.end());
  REQUIRE(each[0] < each[2]);  // the seeds differ, so the median is a choice
  const SimResult m = simulate_seeds(p, spec, c, 3);
  CHECK(m.images_per_sec == each[1]);
  CHECK(m.events == events);
  // The range over the seeds, for telling a configuration on the edge between two regimes.
  CHECK(m.seeds_min_images_per_sec == each[0]);
  CHECK(m.seeds_max_images_per_sec == each[2]);
  CHECK(m.seeds_spread_pct() == Approx(100 * (each[2] - each[0]) / each[1]));
  const SimResult one = simulate(p, spec, c);
  CHECK(one.seeds_min_images_per_sec == one.images_per_sec);
  CHECK(one.seeds_max_images_per_sec == one.images_per_sec);
  CHECK(one.seeds_spread_pct() == 0);
  CHECK(simulate_seeds(p, spec, c, 1).images_per_sec == simulate(p, spec, c).images_per_sec);
  CHECK_THROWS_WITH(simulate_seeds(p, spec, c, 0), Catch::Contains("seeds"));
}

// --trace-out: the traces are those of the run whose figures are reported, the median seed's.
namespace fs = std::filesystem;

TEST_CASE("the traces of several seeds are the median run's", "[predictor][simulator]") {
  const ModelSpec spec = load_model("lenet5");
  const Profile p = varied_profile(spec);
  SimConfig c;
  c.workers = 3;
  c.mode = Consistency::parse("async");
  c.policy.name = "tf-random";
  c.bandwidth_bytes_per_sec = 1.25e7;
  c.arrival_jitter_s = 1e-6;
  c.steps = 20;
  const fs::path dir = fs::temp_directory_path() / "psbed-median-traces-test";
  fs::remove_all(dir);
  c.trace_dir = dir.string();
  const SimResult median = simulate_all(p, spec, {c}, 5, 2).front();
  // Each seed alone, without traces: the median's seed is the one whose figure is the median.
  std::vector<std::pair<double, std::uint64_t>> seeds;
  for (int k = 0; k < 5; ++k) {
    SimConfig one = c;
    one.trace_dir.clear();
    one.seed += std::uint64_t(k), one.policy.seed += std::uint64_t(k);
    seeds.push_back({simulate(p, spec, one).images_per_sec, one.seed});
  }
  std::sort(seeds.begin(), seeds.end());
  CHECK(median.images_per_sec == seeds[2].first);
  CHECK(median.seed == seeds[2].second);
  const nlohmann::json meta = read_trace_metadata((dir / "worker-0.trace.json").string());
  CHECK(meta["cluster"]["seed"] == median.seed);
  CHECK(meta["clock"] == "simulated microseconds");
  fs::remove_all(dir);
}

TEST_CASE("many configurations on several threads: the figures of one simulation after another",
          "[predictor][simulator]") {
  const ModelSpec spec = load_model("lenet5");
  Profile p = varied_profile(spec);
  std::vector<SimConfig> configs;
  for (const char* policy : {"tf-random", "p3", "wfbp"})
    for (int workers : {1, 3}) {
      SimConfig c;
      c.workers = workers;
      c.mode = Consistency::parse("async");
      c.policy.name = policy;
      c.bandwidth_bytes_per_sec = 1.25e7;
      c.link_model = LinkModel::kBucket;
      c.arrival_jitter_s = 1e-6;
      c.steps = 20;
      configs.push_back(c);
    }
  std::vector<SimResult> serial;
  for (const SimConfig& c : configs) serial.push_back(simulate_seeds(p, spec, c, 3));
  for (int jobs : {1, 4, 0}) {
    std::vector<std::pair<std::size_t, double>> done;  // checked here, not on the threads
    const std::vector<SimResult> all =
        simulate_all(p, spec, configs, 3, jobs, [&](std::size_t i, const SimResult& r) {
          done.push_back({i, r.images_per_sec});
        });
    for (const auto& [i, ips] : done) CHECK(ips == serial[i].images_per_sec);
    REQUIRE(all.size() == configs.size());
    for (std::size_t i = 0; i < configs.size(); ++i) {
      CHECK(all[i].images_per_sec == serial[i].images_per_sec);
      CHECK(all[i].steps_per_sec == serial[i].steps_per_sec);
      CHECK(all[i].events == serial[i].events);
      CHECK(all[i].seeds_min_images_per_sec == serial[i].seeds_min_images_per_sec);
      CHECK(all[i].seeds_max_images_per_sec == serial[i].seeds_max_images_per_sec);
    }
    std::vector<std::size_t> reported;
    for (const auto& d : done) reported.push_back(d.first);
    std::sort(reported.begin(), reported.end());
    CHECK(reported == std::vector<std::size_t>{0, 1, 2, 3, 4, 5});  // each reported once
  }
  // Bad configurations among good ones: the error of the first, as a serial run would meet it,
  // comes out once the threads stopped, whichever thread failed first.
  configs[4].policy.name = "no-such-policy-b";
  configs[1].policy.name = "no-such-policy-a";
  for (int round = 0; round < 5; ++round)
    CHECK_THROWS_WITH(simulate_all(p, spec, configs, 2, 4), Catch::Contains("no-such-policy-a"));
  CHECK_THROWS_WITH(simulate_all(p, spec, configs, 0, 1), Catch::Contains("seeds"));
}

TEST_CASE("arrival jitter: each message a little later, a connection's messages in order, seeded",
          "[predictor][simulator]") {
  const ModelSpec spec = parse_model_spec(kTiny, "tiny");
  const Profile p = fixed_profile(spec);
  // One worker as in the one-link case: request, reply, push and acknowledgment each come at
  // most the jitter later, and each hop waits for the one before it.
  const double exact = kOneWorkerStep;
  SimConfig c = config(1);
  c.arrival_jitter_s = 50e-6;
  const SimResult r = simulate(p, spec, c);
  CHECK(1 / r.steps_per_sec > exact);
  CHECK(1 / r.steps_per_sec <= exact + 4 * c.arrival_jitter_s + 1e-12);
  CHECK(simulate(p, spec, c).steps_per_sec == r.steps_per_sec);  // seeded: the same again
  c.seed = 2;
  CHECK(simulate(p, spec, c).steps_per_sec != r.steps_per_sec);

  // A jitter far above the 4 us between the weight's reply and the bias's would swap them half of
  // the time; both come over the shard's one connection, so the bias never overtakes.
  c.arrival_jitter_s = 1e-3;
  c.trace_dir = (std::filesystem::temp_directory_path() / "psbed-sim-jitter-test").string();
  std::filesystem::remove_all(c.trace_dir);
  simulate(p, spec, c);
  const LoadedTrace w = read_trace(c.trace_dir + "/worker-0.trace.json");
  std::map<std::int64_t, double> weight_end, bias_end;
  for (const auto& e : w.events) {
    if (e.name == "pull:fc1.weight#0") weight_end[e.step] = e.ts_us + e.dur_us;
    if (e.name == "pull:fc1.bias#0") bias_end[e.step] = e.ts_us + e.dur_us;
  }
  REQUIRE(weight_end.size() == std::size_t(c.steps));
  REQUIRE(bias_end.size() == std::size_t(c.steps));
  for (const auto& [step, end] : weight_end) {
    INFO("step " << step);
    CHECK(end <= bias_end[step]);
  }
  std::filesystem::remove_all(c.trace_dir);

  c.arrival_jitter_s = -1e-6;
  c.trace_dir.clear();
  CHECK_THROWS_WITH(simulate(p, spec, c), Catch::Contains("jitter"));
}

TEST_CASE("synthetic traces use the measured trace schema", "[predictor][simulator]") {
  const ModelSpec spec = parse_model_spec(kTiny, "tiny");
  const Profile p = fixed_profile(spec);
  SimConfig c = config(2);
  c.steps = 5;
  c.trace_dir = (std::filesystem::temp_directory_path() / "psbed-sim-trace-test").string();
  std::filesystem::remove_all(c.trace_dir);
  simulate(p, spec, c);
  const LoadedTrace w = read_trace(c.trace_dir + "/worker-1.trace.json");
  CHECK(w.node == "worker-1");
  CHECK(w.metadata["role"] == "worker");
  CHECK(w.metadata["compute"] == "simulated");
  int fwd = 0, pulls = 0, steps = 0;
  for (const auto& e : w.events) {
    fwd += e.name == "fwd:fc1" && e.lane == "compute";
    pulls += e.name == "pull:fc1.weight#0" && e.lane == "pull" && e.bytes == 3984;
    steps += e.name == "step" && e.lane == "step";
    if (e.name == "fwd:fc1") CHECK(e.dur_us == Approx(2000));
  }
  CHECK(fwd == 5);
  CHECK(pulls == 5);
  CHECK(steps == 5);
  const LoadedTrace s = read_trace(c.trace_dir + "/server-0.trace.json");
  int applies = 0;
  for (const auto& e : s.events) applies += e.lane == "apply";
  CHECK(applies == 2 * 2 * 5);  // two parts, two workers, five steps
  std::filesystem::remove_all(c.trace_dir);
}

TEST_CASE("bad simulation inputs are named", "[predictor][simulator]") {
  const ModelSpec spec = parse_model_spec(kTiny, "tiny");
  const Profile p = fixed_profile(spec);
  SimConfig c = config(0);
  CHECK_THROWS_WITH(simulate(p, spec, c), Catch::Contains("workers"));
  c = config(1);
  c.policy.name = "nope";
  CHECK_THROWS_WITH(simulate(p, spec, c), Catch::Contains("unknown policy 'nope'"));
  CHECK_THROWS_WITH(Consistency::parse("ssp:x"), Catch::Contains("ssp:x"));
  const ModelSpec lenet = load_model("lenet5");
  CHECK_THROWS_WITH(simulate(p, lenet, config(1)), Catch::Contains("layers"));
}

TEST_CASE(
    "bucket links: each message passes the sender's bucket, then the receiver's, less the burst",
    "[predictor][simulator]") {
  // fc1 of 32,767 x 4 weights + 4 biases: parts of 524,272 and 16 bytes.
  std::string big = kTiny;
  big.replace(big.find("[1, 1, 249]"), 11, "[1, 1, 32767]");
  big.replace(big.find("in = 249"), 8, "in = 32767");
  const ModelSpec spec = parse_model_spec(big, "big");
  Profile p = fixed_profile(spec);
  p.layers[0] = {"fc1", {20.0}, {30.0}};  // idle gaps longer than the burst: every step alike
  SimConfig c = config(1);
  c.link_model = LinkModel::kBucket;
  c.steps = 10;
  const double R = 1 / 4e6;        // seconds per byte
  const double burst = 65536 * R;  // 64 KiB (more than 1 ms of line rate here)
  const double W = 524272, b = 16;
  // Pull: both replies queue in the server's uplink bucket, then the worker's downlink bucket;
  // each bucket starts with a burst of credit. Push the same way round. Plus four latencies.
  const double step = 0.0004 + 0.05 + 2 * ((2 * W + b) * R - 2 * burst);
  const SimResult r = simulate(p, spec, c);
  CHECK(1 / r.steps_per_sec == Approx(step).epsilon(1e-9));
  // Messages within the burst cost nothing but latency.
  const ModelSpec tiny = parse_model_spec(kTiny, "tiny");
  SimConfig t = config(1);
  t.link_model = LinkModel::kBucket;
  CHECK(1 / simulate(fixed_profile(tiny), tiny, t).steps_per_sec ==
        Approx(0.0004 + 0.005).epsilon(1e-9));
}

TEST_CASE("a node handles its arrivals one at a time for the message cost",
          "[predictor][simulator]") {
  const ModelSpec spec = parse_model_spec(kTiny, "tiny");
  SimConfig c = config(1);
  c.message_cost_s = 250e-6;
  // A transfer's two shares go on its data message (2c); a request or an acknowledgment is
  // handed on at once. Pull: both requests reach the shard at L and are answered then; the
  // replies share the pair's channel (the weight's 3,984 bytes take 996 us, the bias's 4 us)
  // and the worker handles them one after the other: forward starts at 2L + 996 us + 4c. Push:
  // the same way round, the shard handling the pushes and the acknowledgments taking nothing:
  // 996 us + 2L + 4c after backward.
  const double step = 4 * 0.0001 + 8 * 0.00025 + 2 * 0.000996 + 0.005;
  CHECK(1 / simulate(fixed_profile(spec), spec, c).steps_per_sec == Approx(step).epsilon(1e-9));
  // Two workers: the shard's receiving thread now serves both, so the step grows.
  SimConfig two = config(2);
  two.message_cost_s = 250e-6;
  CHECK(simulate(fixed_profile(spec), spec, two).worker_steps_per_sec[0] < 1 / step);
}

TEST_CASE("host copies delay every message by its bytes x the transit cost",
          "[predictor][simulator]") {
  const ModelSpec spec = parse_model_spec(kTiny, "tiny");
  const double T = 100e-9;  // 100 ns per byte: the weight part (3,984 bytes) arrives 398.4 us later
  // Fair links: as the first test, each direction's weight part now reaches the other side
  // 398.4 us after it left the wire; the bias part (16 bytes, 1.6 us) is no longer the last.
  SimConfig fair = config(1);
  fair.transit_s_per_byte = T;
  const double fair_step = 4 * 0.0001 + 0.005 + 2 * (0.000996 + 3984 * T);
  CHECK(1 / simulate(fixed_profile(spec), spec, fair).steps_per_sec ==
        Approx(fair_step).epsilon(1e-9));
  // Bucket links: 4,000 bytes fit in the burst (64 KiB), so the links add nothing and each
  // direction is two latencies plus the weight part's copy.
  SimConfig bucket = config(1);
  bucket.link_model = LinkModel::kBucket;
  bucket.transit_s_per_byte = T;
  const double bucket_step = 4 * 0.0001 + 0.005 + 2 * 3984 * T;
  CHECK(1 / simulate(fixed_profile(spec), spec, bucket).steps_per_sec ==
        Approx(bucket_step).epsilon(1e-9));
  bucket.transit_s_per_byte = 0;
  CHECK(1 / simulate(fixed_profile(spec), spec, bucket).steps_per_sec ==
        Approx(4 * 0.0001 + 0.005).epsilon(1e-9));
}

TEST_CASE("a message latency delays every message and holds up nothing else",
          "[predictor][simulator]") {
  const ModelSpec spec = parse_model_spec(kTiny, "tiny");
  // The critical path has four hops (request, reply, push, acknowledgment): each M later.
  const double M = 300e-6;
  for (LinkModel link : {LinkModel::kFair, LinkModel::kBucket}) {
    SimConfig c = config(1);
    c.link_model = link;
    const double base = 1 / simulate(fixed_profile(spec), spec, c).steps_per_sec;
    c.message_latency_s = M;
    CHECK(1 / simulate(fixed_profile(spec), spec, c).steps_per_sec ==
          Approx(base + 4 * M).epsilon(1e-9));
  }
  // Unlike a message cost, it is no resource: eight workers on one shard keep their pace.
  SimConfig eight = config(8, "async");
  eight.bandwidth_bytes_per_sec = 0;
  eight.message_latency_s = M;
  const SimResult r = simulate(fixed_profile(spec), spec, eight);
  CHECK(r.worker_steps_per_sec[0] == Approx(1 / (0.005 + 4 * (0.0001 + M))).epsilon(1e-6));
}

TEST_CASE("the host's cores: every message takes one for its CPU, so a busy host caps the pace",
          "[predictor][simulator]") {
  const ModelSpec spec = parse_model_spec(kTiny, "tiny");
  // wfbp on tiny: 4 transfers a worker-step (2 pulls, 2 pushes), each with two messages' CPU
  // (2 x 200 us) on its reply or push, which carries 16 or 3,984 bytes, the request or ack none:
  // 8 x 200 us + 8,000 x 200 ns = 3.2 ms of CPU (charging the bytes on the requests and acks too
  // would make it 4.8 ms). Eight workers computing 5 ms a step would make 1,600 steps/s; one
  // core does 1 / 3.2 ms, two cores twice that.
  for (int cpus : {1, 2}) {
    SimConfig c = host_config(8, cpus, 200e-6);
    c.steps = 200;
    c.cpu_per_byte_s = 200e-9;
    const SimResult r = simulate(fixed_profile(spec), spec, c);
    CHECK(r.steps_per_sec == Approx(cpus / 0.0032).epsilon(0.02));
    // With a core per node and more the host is no limit: compute and the latencies are.
    c.host_cpus = 64;
    c.cpu_per_message_s = 10e-6;
    c.cpu_per_byte_s = 0;
    CHECK(simulate(fixed_profile(spec), spec, c).worker_steps_per_sec[0] ==
          Approx(1 / (0.005 + 4 * 0.0001 + 4 * 10e-6)).epsilon(0.01));
  }
}

TEST_CASE(
    "a transfer's host CPU goes on its data message: a parked bsp pull costs it when answered",
    "[predictor][simulator]") {
  SimConfig c = host_config(2, 1, 10e-3);
  c.cpu_per_byte_s = 1e-9;
  c.message_cost_s = 1e-3;
  // Both messages' shares and the bytes' on the push or the reply; none on the request or ack.
  CHECK(receive_cost(c, true, 4000).cpu_s == Approx(2 * 10e-3 + 4000 * 1e-9));
  CHECK(receive_cost(c, true, 4000).thread_s == Approx(2e-3));
  CHECK(receive_cost(c, false, 4000).cpu_s == 0);
  CHECK(receive_cost(c, false, 4000).thread_s == 0);
  // A push-pull's messages carry data and have no header beside them: one share each, at a data
  // message's CPU where the profile measured it (else the average).
  CHECK(receive_cost(c, true, 4000, true).cpu_s == Approx(10e-3 + 4000 * 1e-9));
  CHECK(receive_cost(c, true, 4000, true).thread_s == Approx(1e-3));
  {
    SimConfig d = c;
    d.cpu_per_data_message_s = 14e-3;
    CHECK(receive_cost(d, true, 4000, true).cpu_s == Approx(14e-3 + 4000 * 1e-9));
    CHECK(receive_cost(d, true, 4000).cpu_s == Approx(2 * 10e-3 + 4000 * 1e-9));  // unchanged
  }
  // bsp, bulk, one core, 10 ms a message (20 ms a transfer), no latency; worker-0 straggles
  // 100 ms a step, worker-1 waits for it. t = 0: worker-0 pushes both parts: [0, 20) and
  // [20, 40) on the core; each acknowledgment takes none, so at 20 worker-0 has its step and
  // asks for both parts, answered at once (the clock is complete): its replies take [80, 100)
  // and [100, 120), behind worker-1's two replies released at 0 and 20 ([40, 60), [60, 80)).
  // Worker-0 then computes 5 ms and straggles 100 ms: it pushes again at 205. (With every
  // message taking 10 ms where it arrives, as before this rule, the cycle is 214.6 ms.)
  c.cpu_per_byte_s = 0, c.message_cost_s = 0;
  c.mode = Consistency::parse("bsp");
  c.policy.name = "bulk";
  c.latency_s = 0;
  c.straggler_s = 0.1;
  c.steps = 30;
  const ModelSpec spec = parse_model_spec(kTiny, "tiny");
  const SimResult r = simulate(fixed_profile(spec), spec, c);
  CHECK(r.worker_steps_per_sec[0] == Approx(1 / 0.205).epsilon(1e-6));
  CHECK(r.steps_per_sec == Approx(2 / 0.205).epsilon(1e-6));
}

TEST_CASE("real compute takes one of the host's cores; replayed compute takes none",
          "[predictor][simulator]") {
  const ModelSpec spec = parse_model_spec(kTiny, "tiny");
  // Four workers computing 5 ms a step on unlimited links with a message CPU too small to
  // matter: replayed, each keeps its own pace (200 steps/s, 800 in all) on any host; real, they
  // share the cores: one core runs one step's compute at a time (200 steps/s in all), two
  // cores two (400).
  for (int cpus : {1, 2}) {
    SimConfig c = host_config(4, cpus, 1e-9);
    c.latency_s = 0;
    c.steps = 100;
    INFO(cpus << " core(s)");
    CHECK(simulate(fixed_profile(spec), spec, c).steps_per_sec == Approx(4 / 0.005).epsilon(0.01));
    c.compute_on_cores = true;
    CHECK(simulate(fixed_profile(spec), spec, c).steps_per_sec ==
          Approx(cpus / 0.005).epsilon(0.02));
  }
  // One worker, one core: the messages' CPU runs on the core between the compute's pieces, so a
  // step takes the compute plus the eight messages' CPU (8 x 250 us = 2 ms) ...
  SimConfig c = host_config(1, 1, 250e-6);
  c.latency_s = 0;
  c.compute_on_cores = true;
  CHECK(simulate(fixed_profile(spec), spec, c).steps_per_sec == Approx(1 / 0.007).epsilon(0.01));
  // ... and with a second core the messages run beside the compute: a step takes the compute
  // and the CPU of the four messages it waits for in turn (a request, its reply, a push, its
  // acknowledgment; the two parts' messages are handled side by side).
  c.host_cpus = 2;
  CHECK(simulate(fixed_profile(spec), spec, c).steps_per_sec ==
        Approx(1 / (0.005 + 4 * 250e-6)).epsilon(0.01));
  // The CPU booked on the cores per worker-step: the compute's 5 ms and the messages' 2 ms.
  // compute_cpu_scale scales the compute's (psbed validate's what-if): 10 + 2 ms, on one core
  // a step as long; replayed compute takes no core and is not scaled.
  c.host_cpus = 1;
  CHECK(simulate(fixed_profile(spec), spec, c).host_cpu_per_step_s == Approx(0.007).epsilon(0.01));
  c.compute_cpu_scale = 2;
  const SimResult doubled = simulate(fixed_profile(spec), spec, c);
  CHECK(doubled.host_cpu_per_step_s == Approx(0.012).epsilon(0.01));
  CHECK(doubled.steps_per_sec == Approx(1 / 0.012).epsilon(0.01));
  c.compute_on_cores = false;
  const SimResult replayed = simulate(fixed_profile(spec), spec, c);
  CHECK(replayed.host_cpu_per_step_s == Approx(0.002).epsilon(0.01));
  c.compute_cpu_scale = 1;
  CHECK(simulate(fixed_profile(spec), spec, c).steps_per_sec == replayed.steps_per_sec);
  c.host_cpus = 0;  // the cores not modelled: nothing booked
  CHECK(simulate(fixed_profile(spec), spec, c).host_cpu_per_step_s == 0);
}

TEST_CASE("a crowded host's contention scales every CPU cost once processes outnumber the cores",
          "[predictor][simulator]") {
  const ModelSpec spec = parse_model_spec(kTiny, "tiny");
  // Real compute (5 ms a step) and 250 us of CPU a message on 2 cores, contention 0.5: each
  // CPU cost x (1 + 0.5 x min(1, (workers + shards - 2) / 2)).
  auto run = [&](int workers, int servers, double contention, bool real = true) {
    SimConfig c = host_config(workers, 2, 250e-6);
    c.servers = servers;
    c.latency_s = 0;
    c.steps = 60;
    c.compute_on_cores = real;
    c.cpu_contention = contention;
    return simulate(fixed_profile(spec), spec, c);
  };
  for (const auto& [workers, servers, scale] : {std::tuple{1, 1, 1.0}, std::tuple{2, 1, 1.25},
                                                std::tuple{3, 1, 1.5}, std::tuple{4, 2, 1.5}}) {
    INFO(workers << " worker(s), " << servers << " shard(s)");
    const SimResult plain = run(workers, servers, 0), crowded = run(workers, servers, 0.5);
    CHECK(crowded.cpu_contention_scale == Approx(scale));
    // The same compute draws and messages, each booked x scale.
    CHECK(crowded.host_cpu_per_step_s == Approx(scale * plain.host_cpu_per_step_s).epsilon(1e-6));
    if (scale > 1) CHECK(crowded.steps_per_sec < plain.steps_per_sec);
  }
  // with_contention scales the receiving threads' time too, and spends the contention; without
  // the cores modelled there is nothing to scale.
  SimConfig c = host_config(4, 2, 250e-6);
  c.servers = 2, c.compute_on_cores = true, c.cpu_contention = 0.5, c.message_cost_s = 10e-6;
  const SimConfig scaled = with_contention(c);
  CHECK(contention_scale(c) == Approx(1.5));
  CHECK(scaled.message_cost_s == Approx(15e-6));
  CHECK(scaled.cpu_per_message_s == Approx(375e-6));
  CHECK(scaled.compute_cpu_scale == Approx(1.5));
  CHECK(scaled.cpu_contention == 0);
  c.host_cpus = 0;
  CHECK(contention_scale(c) == 1);
  // The analytic bounds charge it as the simulator does: the host bound falls by the factor, and
  // the serial figure stays under the upper one.
  c.host_cpus = 2;
  const Profile prof = fixed_profile(spec);
  SimConfig none = c;
  none.cpu_contention = 0;
  const AnalyticBounds with = analytic_bounds(prof, spec, c),
                       without = analytic_bounds(prof, spec, none);
  CHECK(with.host_bound == Approx(without.host_bound / 1.5));
  CHECK(with.serial <= with.upper);
  CHECK(with.serial < without.serial);
  // Replayed compute sleeps: nothing crowds the cores' caches, nothing is scaled.
  CHECK(run(4, 2, 0.5, false).cpu_contention_scale == 1);
  CHECK(run(4, 2, 0.5, false).steps_per_sec == run(4, 2, 0, false).steps_per_sec);
  SimConfig bad = host_config(1, 2, 250e-6);
  bad.cpu_contention = -1;
  CHECK_THROWS_WITH(simulate(fixed_profile(spec), spec, bad), Catch::Contains("contention"));
}

TEST_CASE(
    "bucket links: a send returns at once unless the send buffer is full, then the thread waits",
    "[predictor][simulator]") {
  // fc1 (20 floats) near the input, fc2 (524,272-byte weight, 131,068-byte bias) at the output:
  // backward computes fc2 first and pushes it, then computes fc1.
  const char* two = R"(name = "two"
input = [1, 1, 4]
classes = 32767
[[layer]]
type = "fc"
name = "fc1"
in = 4
out = 4
[[layer]]
type = "relu"
[[layer]]
type = "fc"
name = "fc2"
in = 4
out = 32767
)";
  const ModelSpec spec = parse_model_spec(two, "two");
  Profile p;
  p.model = spec.name;
  p.batch = 8;
  for (const auto& t : spec.tensors) p.tensors.push_back({t.name, t.layer, t.bytes()});
  p.layers = {
      {"fc1", {20.0}, {30.0}}, {spec.layers[1].name, {0.0}, {0.0}}, {"fc2", {20.0}, {30.0}}};
  SimConfig c = config(1);
  c.link_model = LinkModel::kBucket;
  c.steps = 6;
  const double R = 1 / 4e6, burst = 65536 * R, weight = 524272;
  // When does bwd:fc1 start after bwd:fc2 ends, in the last step?
  auto gap = [&](std::int64_t buffer) {
    c.send_buffer_bytes = buffer;
    c.trace_dir = (std::filesystem::temp_directory_path() / "psbed-sim-buffer-test").string();
    std::filesystem::remove_all(c.trace_dir);
    simulate(p, spec, c);
    const LoadedTrace w = read_trace(c.trace_dir + "/worker-0.trace.json");
    std::filesystem::remove_all(c.trace_dir);
    double fc2_end = 0, fc1_start = 0;
    for (const auto& e : w.events) {
      if (e.step != c.steps - 1) continue;
      if (e.name == "bwd:fc2") fc2_end = e.ts_us + e.dur_us;
      if (e.name == "bwd:fc1") fc1_start = e.ts_us;
    }
    return (fc1_start - fc2_end) * 1e-6;
  };
  // The default 16 MiB buffer takes both fc2 parts: backward goes straight on.
  CHECK(gap(16 << 20) == Approx(0).margin(1e-9));
  // A 100,000-byte buffer takes the weight alone (into an empty buffer, however big), and the
  // bias waits until the weight has left the uplink: an idle bucket's burst, then line rate.
  CHECK(gap(100000) == Approx(weight * R - burst).epsilon(1e-6));
}

TEST_CASE("a staggered start delays worker w by w x stagger / workers before its first step",
          "[predictor][simulator]") {
  const ModelSpec spec = parse_model_spec(kTiny, "tiny");
  const Profile p = fixed_profile(spec);
  // Unshaped links: each worker's step is its 5 ms of compute plus 4 latencies, alone.
  for (const char* mode : {"async", "bsp"}) {
    SimConfig c = config(4, mode);
    c.bandwidth_bytes_per_sec = 0;
    c.start_stagger_s = 0.040;
    const SimResult r = simulate(p, spec, c);
    INFO(mode);
    const double step = 0.005 + 4 * 0.0001;
    if (std::string(mode) == "async") {
      // Apart: every worker keeps its own pace; the last starts 30 ms late and ends 30 ms late.
      for (double sps : r.worker_steps_per_sec) CHECK(sps == Approx(1 / step).epsilon(1e-9));
      CHECK(r.simulated_seconds == Approx(0.030 + 20 * step).epsilon(1e-9));
    } else {
      // bsp waits for the last worker's first gradients: nobody's step 0 ends before it starts.
      CHECK(r.simulated_seconds >= 0.030 + 20 * step - 1e-9);
    }
  }
  SimConfig c = config(2);
  c.start_stagger_s = -0.001;
  CHECK_THROWS_WITH(simulate(p, spec, c), Catch::Contains("start stagger"));
}

// `psbed bench predict`: one row per slice size and worker count, its slices counted from the
// partition plan; halving the slice roughly doubles the slices and the events per worker-step.
TEST_CASE("bench predict rows: slices per step from the plan, events growing with them",
          "[predictor][bench]") {
  const auto out = std::filesystem::temp_directory_path() / "psbed-bench-predict-test.json";
  std::filesystem::remove(out);
  BenchPredictOptions o;
  o.workers = {1, 2};
  o.slice_params = {80000, 40000};
  o.steps = 20;
  o.fidelity = "exact";
  o.json_out = out.string();
  REQUIRE(run_bench_predict(o) == 0);
  std::ifstream in(out);
  const nlohmann::json rows = nlohmann::json::parse(in);
  REQUIRE(rows.size() == 4);
  const ModelSpec spec = load_model("vgg-mini");
  for (const auto& row : rows) {
    INFO(row.dump());
    std::int64_t slices = 0;
    const std::int64_t slice = row["slice_params"].get<std::int64_t>();
    for (const Part& part : make_partition(spec, 4 << 20, 1).parts)
      slices += (part.numel + slice - 1) / slice;
    CHECK(row["slices_per_step"].get<std::int64_t>() == slices);
    CHECK(row["steps"] == 20);
    CHECK(row["events"].get<std::uint64_t>() > 0);
    CHECK(row["images_per_sec"].get<double>() > 0);
  }
  // Rows go slice by slice, worker counts inside: [80000 x 1, 80000 x 2, 40000 x 1, 40000 x 2].
  CHECK(rows[0]["workers"] == 1);
  CHECK(rows[1]["workers"] == 2);
  CHECK(rows[2]["slice_params"] == 40000);
  const auto per_step = [&](int i) { return rows[i]["events_per_worker_step"].get<double>(); };
  const auto slices = [&](int i) { return rows[i]["slices_per_step"].get<double>(); };
  CHECK(slices(2) > 1.5 * slices(0));
  CHECK(per_step(2) > 1.5 * per_step(0));
  CHECK(per_step(3) > 1.5 * per_step(1));
  std::filesystem::remove(out);
}

// `--fidelity both`: each worker count simulated worker by worker, then in groups, the fast
// row's difference from the exact one beside it.
TEST_CASE("bench predict rows: the fast mode beside the exact one", "[predictor][bench]") {
  const auto out = std::filesystem::temp_directory_path() / "psbed-bench-predict-fast.json";
  std::filesystem::remove(out);
  BenchPredictOptions o;
  o.workers = {4};
  o.groups = 2;
  o.steps = 20;
  o.json_out = out.string();
  REQUIRE(run_bench_predict(o) == 0);
  std::ifstream in(out);
  const nlohmann::json rows = nlohmann::json::parse(in);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0]["fidelity"] == "exact");
  CHECK(rows[0]["simulated_workers"] == 4);
  CHECK_FALSE(rows[0].contains("vs_exact_pct"));
  CHECK(rows[1]["fidelity"] == "fast");
  CHECK(rows[1]["simulated_workers"] == 2);
  const double exact = rows[0]["images_per_sec"], fast = rows[1]["images_per_sec"];
  CHECK(rows[1]["vs_exact_pct"].get<double>() == Approx(100 * (fast / exact - 1)));
  CHECK(rows[1]["events"].get<std::uint64_t>() < rows[0]["events"].get<std::uint64_t>());
  std::filesystem::remove(out);
}

TEST_CASE("push-pull: one worker's step loses the pull and gains its floats in the push's answer",
          "[predictor][simulator][push-pull]") {
  const ModelSpec spec = parse_model_spec(kTiny, "tiny");
  SimConfig c = config(1, "async");
  c.push_pull = true;
  // After the first step nothing is pulled: forward 2 ms, backward 3 ms, both parts pushed
  // (4,000 bytes share the uplink: 1 ms) + L; the bias's answer (16 bytes) comes back while the
  // weight is still pushed, the weight's 3,984 bytes take 0.996 ms on the downlink, + L.
  const double step = 0.002 + 0.003 + 0.001 + 0.0001 + 0.000996 + 0.0001;
  const SimResult r = simulate(fixed_profile(spec), spec, c);
  CHECK(1 / r.steps_per_sec == Approx(step).epsilon(1e-9));
  CHECK(step < kOneWorkerStep);
  // One worker in bsp: each push completes its clock and is answered at once, after an ack (the
  // step ends at the ack; the answer reaches the next step when it did in async).
  SimConfig bsp = config(1, "bsp");
  bsp.push_pull = true;
  CHECK(1 / simulate(fixed_profile(spec), spec, bsp).steps_per_sec == Approx(step).epsilon(1e-9));
}

TEST_CASE("bsp push-pull: a push is acknowledged, its answer comes at the clock",
          "[predictor][simulator][push-pull]") {
  const ModelSpec spec = parse_model_spec(kTiny, "tiny");
  // Two workers, the host's CPU per message alone (no bytes): push then pull costs 4 shares a
  // part (push + ack, request + reply), 8 a worker-step for the two parts. With push-pull each
  // push is acknowledged and answered at the clock (push + ack + answer): 3 shares a part, 6 a
  // worker-step. Step 0 also pulls: 4 shares more, over 200 steps.
  SimConfig c = host_config(2, 2, 100e-6);
  c.mode = Consistency::parse("bsp");
  c.cpu_per_byte_s = 0;
  c.steps = 200;
  const double plain = simulate(fixed_profile(spec), spec, c).host_cpu_per_step_s;
  CHECK(plain == Approx(8 * 100e-6).epsilon(0.01));
  c.push_pull = true;
  const SimResult pp = simulate(fixed_profile(spec), spec, c);
  CHECK(pp.host_cpu_per_step_s == Approx((6 + 4.0 / 200) * 100e-6).epsilon(0.01));
  // Async, every push is answered at once: 2 shares a part.
  c.mode = Consistency::parse("async");
  CHECK(simulate(fixed_profile(spec), spec, c).host_cpu_per_step_s ==
        Approx((4 + 4.0 / 200) * 100e-6).epsilon(0.01));
}
