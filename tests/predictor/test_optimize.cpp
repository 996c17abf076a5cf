#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "core/model_spec.hpp"
#include "core/profile.hpp"
#include "predictor/commands.hpp"
#include "predictor/simulator.hpp"

using namespace psbed;
using namespace psbed::predictor;
namespace fs = std::filesystem;

namespace {

const std::string kProfile = std::string(PSBED_FIXTURES_DIR) + "/predictor/regression/profile.json";

// The fixture's lenet5 (61,706 parameters, 246,824 bytes; its largest tensor fc1.weight is
// 48,000) on a 100 Mbit/s link with the default 1 us arrival jitter, 4 workers on 2 shards.
SimConfig lenet5_config(const Profile& profile, const std::string& policy) {
  SimConfig c;
  c.workers = 4, c.servers = 2;
  c.mode = Consistency::parse("async");
  c.policy.name = policy;
  c.bandwidth_bytes_per_sec = 12.5e6;
  c.latency_s = 200e-6;
  c.arrival_jitter_s = kArrivalJitterUs * 1e-6;
  take_host_costs(profile, c);
  c.steps = 40;
  return c;
}

// Runs optimize with its JSON in a temporary file and returns what it wrote.
nlohmann::json optimized(OptimizeOptions o, const std::string& name) {
  const fs::path json = fs::temp_directory_path() / ("psbed-optimize-" + name + ".json");
  o.json_out = json.string();
  REQUIRE(run_optimize(o) == 0);
  nlohmann::json j;
  std::ifstream(json) >> j;
  fs::remove(json);
  return j;
}

void check_alike(const SimResult& a, const SimResult& b) {
  CHECK(a.events == b.events);
  CHECK(a.images_per_sec == b.images_per_sec);
  CHECK(a.simulated_seconds == b.simulated_seconds);
}

}  // namespace

// What optimize merges must simulate alike, event for event: a credit no step can fill (a worker
// has at most one step's pulls or pushes in flight, the model's bytes), a slice or partition no
// part needs (every part goes whole).
TEST_CASE("credits past the model's bytes and slices past the largest part simulate alike",
          "[predictor][optimize]") {
  const Profile profile = Profile::load(kProfile);
  const ModelSpec spec = profile_model_spec(profile, kProfile);
  std::int64_t model_bytes = 0;
  for (const auto& t : spec.tensors) model_bytes += t.bytes();
  REQUIRE(model_bytes < (1 << 20));

  for (const char* name : {"p3", "bytescheduler", "prophet"}) {
    INFO(name);
    SimConfig c = lenet5_config(profile, name);
    c.policy.slice_params = c.policy.partition_params = 10000;  // slices, so the credit can matter
    c.policy.credit_bytes = model_bytes;
    const SimResult at_model = simulate(profile, spec, c);
    for (std::int64_t credit : {std::int64_t(1) << 20, std::int64_t(16) << 20, std::int64_t(-1)}) {
      c.policy.credit_bytes = credit;
      check_alike(simulate(profile, spec, c), at_model);
    }
  }
  for (const char* name : {"p3", "bytescheduler"}) {
    INFO(name);
    SimConfig c = lenet5_config(profile, name);
    c.policy.credit_bytes = 64 << 10;  // a credit that holds transfers back
    c.policy.slice_params = c.policy.partition_params = 48000;
    const SimResult whole = simulate(profile, spec, c);
    c.policy.slice_params = c.policy.partition_params = 1000000;
    check_alike(simulate(profile, spec, c), whole);
  }
}

// optimize lists such configurations once, names the others it stands for, and its JSON holds the
// search's context and every configuration simulated.
TEST_CASE("optimize lists configurations that simulate alike once", "[predictor][optimize]") {
  OptimizeOptions o;
  o.profile = kProfile;
  o.max_nodes = 4;
  o.max_servers = 1;
  o.mode = "async";
  o.policies = {"p3", "bytescheduler", "wfbp"};
  o.sim.bandwidth = "100mbit";
  o.sim.steps = 20;
  o.top = 50;
  o.confirm_seeds = 1;
  nlohmann::json j = optimized(o, "alike");
  INFO(j.dump(1));
  // Worker counts 1, 2, 3: p3 3 slices x 3 credits, bytescheduler 2 partitions x 2 credits, wfbp.
  CHECK(j["configurations_searched"] == 3 * (9 + 4 + 1));
  // Every credit is past the model's bytes, both partitions past its largest part; p3's 10,000
  // and 40,000 parameter slices cut fc1.weight, 160,000 does not.
  CHECK(j["configurations"] == 3 * (3 + 1 + 1));
  CHECK(j["simulated"].size() == j["configurations"].get<std::size_t>());
  std::set<std::string> seen;
  for (const auto& r : j["simulated"]) {
    CHECK(seen.insert(r["description"].get<std::string>() + std::to_string(r["workers"].get<int>()))
              .second);
    if (r["policy"] == "p3") {
      CHECK(r["same"].size() == 2);
      CHECK(r["description"].get<std::string>().find("(same: credit 4.00 MiB, 16.00 MiB)") !=
            std::string::npos);
    }
    if (r["policy"] == "bytescheduler") CHECK(r["same"].size() == 3);
    if (r["policy"] == "wfbp") CHECK(r["description"] == "wfbp");
  }
  CHECK(j["by_images_per_sec"].size() == j["configurations"].get<std::size_t>());
  const auto& s = j["search"];
  CHECK(s["profile"] == kProfile);
  CHECK(s["model"] == "lenet5");
  CHECK(s["mode"] == "async");
  CHECK(s["bandwidth_bytes_per_sec"].get<double>() == Approx(12.5e6));
  CHECK(s["link_model"] == "bucket");
  CHECK(s["steps"] == 20);
  CHECK(s["seeds"] == 1);
  CHECK(s["largest_part_params"] == 48000);

  // --credit default fixes each policy's own credit: one credit each, none searched.
  o.credit_given = true;
  j = optimized(o, "alike-credit");
  CHECK(j["configurations_searched"] == 3 * (3 + 2 + 1));
  for (const auto& r : j["simulated"]) CHECK(r["credit_bytes"] == -1);
}

TEST_CASE("optimize --replicas 2: two shards or more", "[predictor][optimize][replicas]") {
  OptimizeOptions o;
  o.profile = kProfile;
  o.max_nodes = 4;
  o.max_servers = 2;
  o.mode = "bsp";
  o.policies = {"p3", "wfbp"};
  o.sim.bandwidth = "100mbit";
  o.sim.steps = 20;
  o.sim.replicas = 2;
  o.top = 50;
  o.confirm_seeds = 1;
  nlohmann::json j = optimized(o, "replicas");
  INFO(j.dump(1));
  // Two shards only (launch refuses one), workers 1 and 2, under both policies: a bsp push is
  // acknowledged once the backup has it, so p3's credit holds nothing back for good.
  CHECK(j["search"]["replicas"] == 2);
  std::set<std::string> policies;
  for (const auto& r : j["simulated"]) {
    CHECK(r["servers"] == 2);
    policies.insert(r["policy"].get<std::string>());
  }
  CHECK(policies == std::set<std::string>{"p3", "wfbp"});
  o.policies = {"wfbp"};
  o.max_servers = 1;
  CHECK_THROWS_WITH(run_optimize(o), Catch::Contains("--replicas 2 needs --max-servers 2"));
}

// --fidelity auto searches in the fast mode and confirms the leaders as predict would: worker by
// worker up to 64 workers. Below the groups' count the fast mode is the exact one.
TEST_CASE("optimize searches in the fast mode, confirms the leaders exactly",
          "[predictor][optimize][fast]") {
  OptimizeOptions o;
  o.profile = kProfile;
  o.max_nodes = 13;
  o.max_servers = 1;
  o.policies = {"wfbp"};
  o.sim.bandwidth = "100mbit";
  o.sim.host_cpus = 0;  // separate machines: groups may stand for workers
  o.sim.groups = 4;
  o.sim.steps = 10;
  o.top = 1;
  o.confirm_seeds = 2;
  nlohmann::json j = optimized(o, "fast");
  INFO(j.dump(1));
  CHECK(j["search_fidelity"] == "fast");
  CHECK(j["search_seconds"].get<double>() > 0);
  int grouped = 0, confirmed = 0;
  for (const auto& r : j["simulated"]) {
    const int workers = r["workers"];
    CHECK(r["simulated_workers"] == std::min(workers, 4));
    grouped += workers > 4;
    if (!r.contains("confirmed")) continue;
    ++confirmed;
    CHECK(r["confirmed"]["simulated_workers"] == workers);  // auto: exact up to 64
  }
  CHECK(grouped > 0);  // 6, 8 and 12 workers
  CHECK(confirmed > 0);
}

// --verify's settings check gets the first configuration by images/s whose policy has settings
// that act differently, then the others the search simulated at its workers and servers.
TEST_CASE("optimize hands the settings check the recommended setting and its rivals",
          "[predictor][optimize]") {
  OptimizeOptions o;
  o.profile = kProfile;
  o.max_nodes = 4;
  o.max_servers = 1;
  o.mode = "bsp";
  o.policies = {"wfbp", "p3"};
  o.sim.bandwidth = "100mbit";
  o.sim.steps = 10;
  o.top = 3;
  o.confirm_seeds = 2;
  OptimizeChoice best;
  std::vector<OptimizeChoice> settings;
  REQUIRE(run_optimize(o, &best, &settings) == 0);
  REQUIRE(best.workers > 0);
  // p3's credits are all past lenet5's bytes (one setting each), its slices 10k, 40k and whole.
  REQUIRE(settings.size() == 3);
  const OptimizeChoice& rec = settings.front();
  CHECK(rec.policy == "p3");
  std::set<std::int64_t> slices;
  for (const OptimizeChoice& s : settings) {
    INFO(s.description);
    CHECK(s.policy == "p3");
    CHECK(s.workers == rec.workers);
    CHECK(s.servers == rec.servers);
    CHECK(s.images_per_sec > 0);
    CHECK(s.bandwidth == "100mbit");
    slices.insert(s.slice_params);
  }
  CHECK(slices.size() == 3);
  // Where the best is p3, it is the recommended setting.
  if (best.policy == "p3") CHECK(best.description == rec.description);

  o.policies = {"wfbp", "bulk"};  // no settings to check
  REQUIRE(run_optimize(o, &best, &settings) == 0);
  CHECK(settings.empty());
}

// A large search is scanned at a third of the steps first; only the scan's leaders are searched
// in full, and what the rankings show comes from the full passes.
TEST_CASE("optimize --scan searches in full only the scan's leaders", "[predictor][optimize]") {
  OptimizeOptions o;
  o.profile = kProfile;
  o.max_nodes = 9;
  o.max_servers = 2;
  o.mode = "bsp";
  o.policies = {"wfbp", "p3", "bulk"};
  o.sim.bandwidth = "100mbit";
  o.sim.steps = 45;
  o.top = 1;
  o.confirm_seeds = 2;
  o.scan = "on";
  const nlohmann::json on = optimized(o, "scan-on");
  o.scan = "off";
  const nlohmann::json off = optimized(o, "scan-off");
  INFO(on.dump(1));
  const std::size_t configs = on.at("configurations").get<std::size_t>();
  REQUIRE(configs > 16);  // more than the 8 x --top of each ranking the scan keeps
  CHECK(on.at("scan_steps") == 15);
  CHECK(off.at("scan_steps") == 0);
  CHECK(on.at("configurations_searched_in_full").get<std::size_t>() <= 16);
  CHECK(off.at("configurations_searched_in_full").get<std::size_t>() == configs);
  std::size_t stopped = 0;
  for (const auto& row : on.at("simulated")) {
    CHECK(row.contains("scan_images_per_sec"));
    if (!row.at("searched").get<bool>()) {
      ++stopped;
      CHECK(row.at("images_per_sec") == row.at("scan_images_per_sec"));
      CHECK_FALSE(row.contains("confirmed"));
    }
  }
  CHECK(stopped == configs - on.at("configurations_searched_in_full").get<std::size_t>());
  // The leaders, and their confirmed figures, are those of the search without a scan.
  for (const char* ranking : {"by_images_per_sec", "by_images_per_sec_per_node"}) {
    INFO(ranking);
    CHECK(on.at(ranking).at(0).at("description") == off.at(ranking).at(0).at("description"));
    CHECK(on.at(ranking).at(0).at("images_per_sec") == off.at(ranking).at(0).at("images_per_sec"));
  }
}
