#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>

#include "core/error.hpp"
#include "core/model_spec.hpp"
#include "core/profile.hpp"

using namespace psbed;

namespace {

Profile profile_of(const ModelSpec& spec) {
  Profile p;
  p.model = spec.name;
  p.batch = 32;
  for (const auto& t : spec.tensors) p.tensors.push_back({t.name, t.layer, t.bytes()});
  for (const auto& l : spec.layers) p.layers.push_back({l.name, {1.0, 2.0, 3.0}, {4.0}});
  p.apply_ns_per_byte = 0.5;
  p.bandwidth_bytes_per_sec = 1.25e8;
  p.latency_us = 200;
  p.step_overhead_ms = {0.1, 0.2};
  p.source = {{"run", "runs/x"}, {"workers", 1}};
  return p;
}

}  // namespace

TEST_CASE("a profile round-trips through profile.json and matches its model", "[core][profile]") {
  const ModelSpec spec = load_model("lenet5");
  const Profile p = profile_of(spec);
  const auto path = (std::filesystem::temp_directory_path() / "psbed-profile-test.json").string();
  p.save(path);
  const Profile q = Profile::load(path);
  std::remove(path.c_str());
  CHECK(q.model == "lenet5");
  CHECK(q.tensors.size() == spec.tensors.size());
  CHECK(q.parameter_bytes() == spec.parameter_bytes());
  CHECK(q.layers[0].forward_ms == std::vector<double>{1.0, 2.0, 3.0});
  CHECK(q.mean_forward_ms(0) == Approx(2.0));
  CHECK(q.mean_compute_ms() == Approx(6.0 * double(spec.layers.size())));
  CHECK(q.bandwidth_bytes_per_sec == Approx(1.25e8));
  CHECK(q.source["workers"] == 1);
  CHECK_NOTHROW(q.check_matches(spec, "p"));
  CHECK_THROWS_WITH(q.check_matches(load_model("mlp"), "p"), Catch::Contains("layers"));
  // The host's contention: written where measured, 0 where a profile has none, never negative.
  CHECK(q.contention == 0);
  CHECK_FALSE(q.to_json().contains("host"));
  Profile h = p;
  h.host_cpus = 2, h.cpu_per_message_us = 40, h.contention = 0.3;
  CHECK(Profile::from_json(h.to_json(), "h").contention == Approx(0.3));
  h.contention = 0;
  CHECK_FALSE(h.to_json()["host"].contains("contention"));  // profiles without it stay as they were
  auto j = h.to_json();
  j["host"]["contention"] = -0.1;
  CHECK_THROWS_WITH(Profile::from_json(j, "h"), Catch::Contains("contention"));
  // A data message's CPU alone (profile --push-pull-run): kept where measured, else absent.
  CHECK_FALSE(h.to_json()["host"].contains("cpu_per_data_message_us"));
  h.cpu_per_data_message_us = 55;
  CHECK(Profile::from_json(h.to_json(), "h").cpu_per_data_message_us == Approx(55));
  j = h.to_json();
  j["host"]["cpu_per_data_message_us"] = -1;
  CHECK_THROWS_WITH(Profile::from_json(j, "h"), Catch::Contains("cpu_per_data_message_us"));
}

TEST_CASE("a malformed profile names the field", "[core][profile]") {
  const ModelSpec spec = load_model("mlp");
  nlohmann::json j = profile_of(spec).to_json();
  j["layers"][1].erase("backward_ms");
  CHECK_THROWS_WITH(Profile::from_json(j, "p.json"),
                    Catch::Contains("layers[1]") && Catch::Contains("backward_ms"));
  j = profile_of(spec).to_json();
  j["format"] = "other/2";
  CHECK_THROWS_WITH(Profile::from_json(j, "p.json"), Catch::Contains("psbed-profile/1"));
  j = profile_of(spec).to_json();
  j["tensors"][0]["layer"] = 99;
  CHECK_THROWS_WITH(Profile::from_json(j, "p.json"), Catch::Contains("layer 99"));
  CHECK_THROWS_WITH(Profile::load("/nonexistent/profile.json"),
                    Catch::Contains("/nonexistent/profile.json"));
  // A folder where a file is expected: said so, not a stream error.
  const std::string dir = std::filesystem::temp_directory_path().string();
  CHECK_THROWS_WITH(Profile::load(dir), Catch::Contains("'" + dir + "' is a folder"));
  CHECK_THROWS_WITH(Profile{}.save(dir), Catch::Contains("it is a folder"));
  CHECK_THROWS_WITH(load_model(dir + "/"), Catch::Contains("is a folder, expected a .toml"));
}

// A figure that cannot be negative is refused when the profile is read, naming it (a hand-edited
// bandwidth of -1 failed later, inside a simulation).
TEST_CASE("a profile's negative link, apply cost or tensor size is refused when read",
          "[core][profile]") {
  const ModelSpec spec = load_model("mlp");
  auto refused = [&](const char* section, const char* key, const char* want) {
    nlohmann::json j = profile_of(spec).to_json();
    if (std::string(section) == "tensors")
      j["tensors"][0][key] = -4;
    else
      j[section][key] = -1;
    INFO(section << "." << key);
    CHECK_THROWS_WITH(Profile::from_json(j, "p.json"),
                      Catch::Contains("p.json") && Catch::Contains(key) && Catch::Contains(want));
  };
  refused("link", "bandwidth_bytes_per_sec", "is -1.0, expected 0 or more (0: no link limit)");
  refused("link", "latency_us", "expected 0 or more");
  refused("server", "apply_ns_per_byte", "expected 0 or more");
  refused("server", "apply_overhead_us", "expected 0 or more");
  refused("tensors", "bytes", "is -4, expected 0 or more");
  nlohmann::json j = profile_of(spec).to_json();
  j["link"]["bandwidth_bytes_per_sec"] = 0;  // no link limit: taken
  CHECK(Profile::from_json(j, "p.json").bandwidth_bytes_per_sec == 0);
}

// host.cpus of 10^7 made every simulated message scan ten million cores: `predict` ran for
// minutes, and a coordinator's /api/prediction with it. Counts and figures have bounds, each
// refused in one line naming the field and what is allowed.
TEST_CASE("a profile's counts and figures past their bounds are refused, naming the field",
          "[core][profile]") {
  const ModelSpec spec = load_model("mlp");
  const nlohmann::json good = profile_of(spec).to_json();
  auto refused = [&](const std::string& want, auto&& edit) {
    nlohmann::json j = good;
    edit(j);
    CHECK_THROWS_WITH(Profile::from_json(j, "p.json"),
                      Catch::Contains("p.json") && Catch::Contains(want));
  };
  refused("host: cpus is 10000000, expected 0 to 1024 (0: not measured)", [](auto& j) {
    j["host"] = {{"cpus", 10000000}, {"cpu_per_message_us", 1.0}};
  });
  refused("host: cpus is -2, expected 0 to 1024", [](auto& j) { j["host"] = {{"cpus", -2}}; });
  refused("field 'cpus' is 1000000000000, expected a whole number from", [](auto& j) {
    j["host"] = {{"cpus", 1000000000000LL}};
  });
  refused("batch is 0, expected 1 to 1048576", [](auto& j) { j["batch"] = 0; });
  refused("batch is 2000000, expected 1 to 1048576", [](auto& j) { j["batch"] = 2000000; });
  refused("cpu_per_byte_ns is 1e+300, expected below 10^12", [](auto& j) {
    j["host"] = {{"cpus", 2}, {"cpu_per_byte_ns", 1e300}};
  });
  refused("link: latency_us is 1e+20, expected below 10^12",
          [](auto& j) { j["link"]["latency_us"] = 1e20; });
  refused("message_cost_us is -1.0, expected 0 or more",
          [](auto& j) { j["link"]["message_cost_us"] = -1.0; });
  refused("'forward_ms' holds 1e+200 ms, expected below 10^7",
          [](auto& j) { j["layers"][0]["forward_ms"] = {1e200}; });
  refused("bytes is 2199023255552, expected at most 2^40",
          [](auto& j) { j["tensors"][0]["bytes"] = std::int64_t(1) << 41; });
  nlohmann::json j = good;
  j["host"] = {{"cpus", 1024}, {"cpu_per_message_us", 1.0}};
  CHECK(Profile::from_json(j, "p.json").host_cpus == 1024);
}

// A cost left out of a hand-edited profile was taken for 0 (an unlimited link, a free apply) and
// the prediction came out several times too fast without a word; a source field of the wrong kind
// failed later as a bare JSON type error.
TEST_CASE(
    "a profile without its link, server or step overhead, or with a source field of the wrong "
    "kind, is refused",
    "[core][profile]") {
  const ModelSpec spec = load_model("mlp");
  const nlohmann::json good = profile_of(spec).to_json();
  for (const char* key : {"link", "server", "step_overhead_ms"}) {
    nlohmann::json j = good;
    j.erase(key);
    INFO(key);
    CHECK_THROWS_WITH(Profile::from_json(j, "p.json"),
                      Catch::Contains("p.json") && Catch::Contains(key));
  }
  for (const auto& [section, key] : {std::pair<const char*, const char*>{"link", "latency_us"},
                                     {"link", "bandwidth_bytes_per_sec"},
                                     {"server", "apply_ns_per_byte"}}) {
    nlohmann::json j = good;
    j[section].erase(key);
    INFO(section << "." << key);
    CHECK_THROWS_WITH(Profile::from_json(j, "p.json"), Catch::Contains(key));
  }
  nlohmann::json j = good;
  j["source"]["compute"] = 1;
  CHECK_THROWS_WITH(Profile::from_json(j, "p.json"),
                    Catch::Contains("p.json: source.compute is not a string"));
  j = good;
  j["source"] = "x";
  CHECK_THROWS_WITH(Profile::from_json(j, "p.json"), Catch::Contains("'source' is not an object"));
  j = good;
  j["source"]["warnings"] = {1};
  CHECK_THROWS_WITH(Profile::from_json(j, "p.json"), Catch::Contains("source.warnings"));
  // The host's costs stay optional: older profiles lack them.
  j = good;
  j.erase("host");
  CHECK(Profile::from_json(j, "p.json").host_cpus == 0);
}

TEST_CASE("the compute sampler draws only profiled samples, reproducibly", "[core][profile]") {
  const Profile p = profile_of(load_model("mlp"));
  ComputeSampler a(p, 7), b(p, 7);
  bool seen[3] = {false, false, false};
  for (int i = 0; i < 200; ++i) {
    const double x = a.forward_s(0);
    CHECK(x == b.forward_s(0));
    REQUIRE((x == 0.001 || x == 0.002 || x == 0.003));
    seen[int(x * 1000 + 0.5) - 1] = true;
    CHECK(a.backward_s(0) == Approx(0.004));
    b.backward_s(0);
  }
  CHECK((seen[0] && seen[1] && seen[2]));
}
