#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "core/profile.hpp"
#include "core/trace.hpp"
#include "worker/replay_net.hpp"

using namespace psbed;

namespace {

Profile profile_of(const ModelSpec& spec, double fwd_ms, double bwd_ms, int batch) {
  Profile p;
  p.model = spec.name;
  p.batch = batch;
  for (const auto& t : spec.tensors) p.tensors.push_back({t.name, t.layer, t.bytes()});
  for (const auto& l : spec.layers) p.layers.push_back({l.name, {fwd_ms}, {bwd_ms}});
  return p;
}

}  // namespace

TEST_CASE("compute takes real or replay:<profile>", "[worker][replay]") {
  CHECK(worker::replay_profile_path("real").empty());
  CHECK(worker::replay_profile_path("replay:/tmp/p.json") == "/tmp/p.json");
  CHECK_THROWS_WITH(worker::replay_profile_path("replay:"),
                    Catch::Contains("replay:<profile.json>"));
  CHECK_THROWS_WITH(worker::replay_profile_path("fake"), Catch::Contains("'fake'"));
}

TEST_CASE("a replay net sleeps the profiled durations, scaled by batch, and computes nothing",
          "[worker][replay]") {
  const ModelSpec spec = load_model("lenet5");
  // Profiled at batch 16; replayed at batch 32: every duration doubles.
  const Profile p = profile_of(spec, 1.0, 2.0, 16);
  auto net = worker::make_replay_net(spec, 32, 1, p, "p");
  CHECK(net->device() == "replay");
  const double t0 = now_us();
  net->forward_all();
  const double fwd_ms = (now_us() - t0) / 1e3;
  const double t1 = now_us();
  net->backward_all();
  const double bwd_ms = (now_us() - t1) / 1e3;
  const double layers = double(spec.layers.size());
  // Sleeps end no earlier than asked (their lateness depends on the machine, so no upper bound).
  CHECK(fwd_ms >= 2.0 * layers);
  CHECK(bwd_ms >= 4.0 * layers);
  for (int t = 0; t < int(spec.tensors.size()); ++t) {
    const float* g = net->grad(t);
    bool zero = true, nonzero_param = false;
    for (std::int64_t i = 0; i < spec.tensors[t].numel; ++i) zero = zero && g[i] == 0.0f;
    for (std::int64_t i = 0; i < spec.tensors[t].numel; ++i)
      nonzero_param = nonzero_param || net->param(t)[i] != 0.0f;
    CHECK(zero);
    if (spec.tensors[t].dims.size() > 1)
      CHECK(nonzero_param);  // weights initialised like a real net
  }
}

TEST_CASE("a replay profile of another model is refused, naming both", "[worker][replay]") {
  const Profile p = profile_of(load_model("mlp"), 1.0, 1.0, 32);
  CHECK_THROWS_WITH(worker::make_replay_net(load_model("lenet5"), 32, 1, p, "profile 'x.json'"),
                    Catch::Contains("x.json") && Catch::Contains("lenet5"));
}
