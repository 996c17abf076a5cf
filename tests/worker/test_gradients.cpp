// Finite-difference checks of every layer type, forward and backward, through the whole net:
// the gradient of a parameter in an early layer is only right if every later layer's backward
// (data) is right, so each model below puts the layer under test between two weighted layers.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <string>

#include "core/model_spec.hpp"
#include "worker/net.hpp"

using namespace psbed;

namespace {

struct Case {
  const char* name;
  const char* toml;
};

const Case kCases[] = {
    {"fc", R"(input = [2, 3, 3]
classes = 4
[[layer]]
type = "fc"
out = 7
[[layer]]
type = "fc"
out = 4
)"},
    {"conv", R"(input = [2, 6, 6]
classes = 4
[[layer]]
type = "conv"
out_channels = 3
kernel = 3
pad = 1
[[layer]]
type = "conv"
out_channels = 5
kernel = 3
stride = 2
[[layer]]
type = "fc"
out = 4
)"},
    {"relu", R"(input = [3, 4, 4]
classes = 4
[[layer]]
type = "conv"
out_channels = 4
kernel = 3
pad = 1
[[layer]]
type = "relu"
[[layer]]
type = "fc"
out = 6
[[layer]]
type = "relu"
[[layer]]
type = "fc"
out = 4
)"},
    {"maxpool", R"(input = [2, 6, 6]
classes = 4
[[layer]]
type = "conv"
out_channels = 3
kernel = 3
pad = 1
[[layer]]
type = "maxpool"
kernel = 2
[[layer]]
type = "fc"
out = 4
)"},
    {"lenet-like", R"(input = [1, 12, 12]
classes = 5
[[layer]]
type = "conv"
out_channels = 4
kernel = 3
pad = 1
[[layer]]
type = "relu"
[[layer]]
type = "maxpool"
kernel = 2
[[layer]]
type = "conv"
out_channels = 6
kernel = 3
[[layer]]
type = "relu"
[[layer]]
type = "maxpool"
kernel = 2
[[layer]]
type = "fc"
out = 8
[[layer]]
type = "relu"
[[layer]]
type = "fc"
out = 5
)"},
};

float loss_of(worker::Net& net) {
  net.forward_all();
  return net.compute_loss().loss;
}

void check_gradients(const ModelSpec& spec, int batch, const char* name) {
  auto net = worker::make_cpu_net(spec, batch, 7);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> x(spec.input.numel() * batch);
  for (auto& v : x) v = u(rng);
  std::vector<std::int32_t> y(batch);
  for (auto& v : y) v = std::int32_t(rng() % spec.classes);
  net->set_batch(x.data(), y.data(), batch);
  // Biases start at zero; give them values so the ReLU/pool patterns are generic.
  for (int t = 0; t < int(spec.tensors.size()); ++t)
    if (spec.tensors[t].dims.size() == 1)
      for (std::int64_t i = 0; i < spec.tensors[t].numel; ++i) net->param(t)[i] = 0.1f * u(rng);
  net->all_params_updated();

  loss_of(*net);
  net->backward_all();
  std::vector<std::vector<float>> analytic;
  for (int t = 0; t < int(spec.tensors.size()); ++t)
    analytic.emplace_back(net->grad(t), net->grad(t) + spec.tensors[t].numel);

  const float eps = 1e-3f;
  int checked = 0, kinks = 0;
  for (int t = 0; t < int(spec.tensors.size()); ++t) {
    const auto& ts = spec.tensors[t];
    for (int k = 0; k < 12; ++k) {
      std::int64_t i = std::int64_t(rng() % ts.numel);
      float* p = net->param(t) + i;
      const float orig = *p;
      const double l0 = loss_of(*net);
      *p = orig + eps;
      net->params_updated(t);
      const double lp = loss_of(*net);
      *p = orig - eps;
      net->params_updated(t);
      const double lm = loss_of(*net);
      *p = orig;
      net->params_updated(t);
      const double numeric = (lp - lm) / (2 * eps);
      // A ReLU or max-pool kink inside [orig - eps, orig + eps] makes the loss non-smooth
      // there; the two one-sided slopes then disagree, and the point says nothing.
      const double right = (lp - l0) / eps, left = (l0 - lm) / eps;
      if (std::abs(right - left) > 0.2 * std::abs(numeric) + 2e-3) {
        ++kinks;
        continue;
      }
      INFO(name << ": " << ts.name << "[" << i << "] analytic " << analytic[t][i] << " numeric "
                << numeric);
      CHECK(std::abs(analytic[t][i] - numeric) <= 2e-3 + 3e-2 * std::abs(numeric));
      ++checked;
    }
  }
  INFO(name << ": " << checked << " points checked, " << kinks << " skipped at kinks");
  REQUIRE(checked >= 4 * kinks);
}

}  // namespace

TEST_CASE("every layer type passes a finite-difference gradient check", "[worker][gradients]") {
  for (const auto& c : kCases) {
    SECTION(c.name) { check_gradients(parse_model_spec(c.toml, c.name), 3, c.name); }
  }
}

// oneDNN picks different kernels and layouts for different shapes: check the shipped models at
// their real batch sizes too.
TEST_CASE("shipped models pass the gradient check at their benchmark batch",
          "[worker][gradients]") {
  SECTION("lenet5") { check_gradients(load_model("lenet5"), 64, "lenet5"); }
  SECTION("cnn-cifar") { check_gradients(load_model("cnn-cifar"), 32, "cnn-cifar"); }
}
