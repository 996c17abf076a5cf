// The GPU backend against the CPU backend (oneDNN, the reference), layer by layer: every
// layer's output after forward, the loss, every parameter gradient and every layer's input
// gradient after backward, on nets of random shapes built from the same seed.
//
// Tolerance: |gpu - cpu| <= 1e-4 * (1 + max |cpu|) over each compared tensor. Both sides are
// FP32 with different summation orders (cuBLAS vs oneDNN blocking, im2col GEMM vs direct
// convolution); over the reduction lengths here (up to a few thousand terms) that differs by
// ~1e-6 relative, and a wrong index or a missing term is off by far more than 1e-4.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/model_spec.hpp"
#include "core/optimizer.hpp"
#include "core/trace.hpp"
#include "worker/evaluate.hpp"
#include "worker/net.hpp"
#include "workloads/dataset.hpp"

using namespace psbed;

namespace {

constexpr double kTol = 1e-4;

void check_close(const std::vector<float>& gpu, const std::vector<float>& cpu,
                 const std::string& what) {
  REQUIRE(gpu.size() == cpu.size());
  double ref = 0, worst = 0;
  std::size_t at = 0;
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    ref = std::max(ref, double(std::fabs(cpu[i])));
    const double d = std::fabs(double(gpu[i]) - double(cpu[i]));
    if (!(d <= worst)) worst = d, at = i;  // also catches NaN
  }
  INFO(what << ": largest difference " << worst << " at " << at << " (gpu " << gpu[at] << ", cpu "
            << cpu[at] << "), bound " << kTol * (1 + ref));
  CHECK(worst <= kTol * (1 + ref));
}

// A random small CNN: one or two conv blocks (conv, optionally a max pool, relu) of random
// channels, kernel, stride and padding, then one or two fc layers. The pool comes before the
// relu so that its windows hold no ties (after a relu many hold several zeros, and which zero
// receives the gradient is each backend's choice; the relu then zeroes it either way).
std::string random_model(std::mt19937& rng, int& batch) {
  auto pick = [&](int lo, int hi) { return lo + int(rng() % unsigned(hi - lo + 1)); };
  std::ostringstream s;
  int c = pick(1, 4), h = pick(7, 14), w = pick(7, 14);
  s << "input = [" << c << ", " << h << ", " << w << "]\nclasses = " << pick(2, 7) << "\n";
  const int blocks = pick(1, 2);
  for (int b = 0; b < blocks; ++b) {
    const int k = pick(1, std::min({4, h, w})), stride = pick(1, 2), pad = pick(0, k / 2);
    s << "[[layer]]\ntype = \"conv\"\nout_channels = " << pick(2, 9) << "\nkernel = " << k
      << "\nstride = " << stride << "\npad = " << pad << "\n";
    h = (h + 2 * pad - k) / stride + 1, w = (w + 2 * pad - k) / stride + 1;
    if (h >= 4 && w >= 4 && rng() % 2) {
      const int pk = pick(2, 3), ps = pick(1, pk), pp = pick(0, 1);
      s << "[[layer]]\ntype = \"maxpool\"\nkernel = " << pk << "\nstride = " << ps
        << "\npad = " << pp << "\n";
      h = (h + 2 * pp - pk) / ps + 1, w = (w + 2 * pp - pk) / ps + 1;
    }
    s << "[[layer]]\ntype = \"relu\"\n";
  }
  if (rng() % 2)
    s << "[[layer]]\ntype = \"fc\"\nout = " << pick(3, 17) << "\n[[layer]]\ntype = \"relu\"\n";
  s << "[[layer]]\ntype = \"fc\"\nout = CLASSES\n";
  std::string text = s.str();
  const auto cls_at = text.find("classes = ") + 10;
  const std::string classes = text.substr(cls_at, text.find('\n', cls_at) - cls_at);
  text.replace(text.find("CLASSES"), 7, classes);
  batch = pick(1, 9);
  return text;
}

struct Pair {
  std::unique_ptr<worker::Net> cpu, gpu;
};

// Both nets start from the same parameters (init_tensor, seed 7) with random biases, and get
// the same random batch of n samples (n < batch leaves padding).
Pair make_pair(const ModelSpec& spec, int batch, int n, std::mt19937& rng) {
  Pair p{worker::make_net("cpu", spec, batch, 7), worker::make_net("gpu", spec, batch, 7)};
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (int t = 0; t < int(spec.tensors.size()); ++t) {
    if (spec.tensors[t].dims.size() == 1)
      for (std::int64_t i = 0; i < spec.tensors[t].numel; ++i) p.cpu->param(t)[i] = 0.1f * u(rng);
    std::copy(p.cpu->param(t), p.cpu->param(t) + spec.tensors[t].numel, p.gpu->param(t));
  }
  p.cpu->all_params_updated();
  p.gpu->all_params_updated();
  std::vector<float> x(std::size_t(spec.input.numel()) * batch);
  for (auto& v : x) v = u(rng);
  std::vector<std::int32_t> y(batch);
  for (auto& v : y) v = std::int32_t(rng() % unsigned(spec.classes));
  p.cpu->set_batch(x.data(), y.data(), n);
  p.gpu->set_batch(x.data(), y.data(), n);
  return p;
}

// One step on both nets, comparing everything the interface exposes after each call.
// The input gradient of a pool that follows a relu is left out (ties, see random_model).
void compare_step(const ModelSpec& spec, Pair& p, const std::string& name) {
  const int batch = p.cpu->batch();
  for (int l = 0; l < p.cpu->num_layers(); ++l) {
    p.cpu->forward(l);
    p.gpu->forward(l);
    std::vector<float> a(std::size_t(spec.layers[l].out.numel()) * batch), b(a.size());
    p.gpu->read_output(l, a.data());
    p.cpu->read_output(l, b.data());
    check_close(a, b, name + ": forward of " + spec.layers[l].name);
  }
  const auto lc = p.cpu->compute_loss(), lg = p.gpu->compute_loss();
  INFO(name << ": loss gpu " << lg.loss << " cpu " << lc.loss);
  CHECK(std::fabs(lg.loss - lc.loss) <= kTol * (1 + std::fabs(lc.loss)));
  CHECK(lg.correct == lc.correct);
  for (int l = p.cpu->num_layers() - 1; l >= 0; --l) {
    p.cpu->backward(l);
    p.gpu->backward(l);
    for (int t : spec.layers[l].tensors) {
      const auto n = std::size_t(spec.tensors[t].numel);
      check_close(std::vector<float>(p.gpu->grad(t), p.gpu->grad(t) + n),
                  std::vector<float>(p.cpu->grad(t), p.cpu->grad(t) + n),
                  name + ": gradient of " + spec.tensors[t].name);
    }
    const bool tie_prone = l > 0 && spec.layers[l].type == LayerType::kMaxPool &&
                           spec.layers[l - 1].type == LayerType::kRelu;
    if (l > 0 && !tie_prone) {
      std::vector<float> a(std::size_t(spec.layers[l].in.numel()) * batch), b(a.size());
      p.gpu->read_input_grad(l, a.data());
      p.cpu->read_input_grad(l, b.data());
      check_close(a, b, name + ": input gradient of " + spec.layers[l].name);
    }
  }
}

}  // namespace

TEST_CASE("every gpu layer matches the cpu backend on random shapes", "[gpu]") {
  std::mt19937 rng(2024);
  for (int trial = 0; trial < 12; ++trial) {
    int batch = 1;
    const std::string text = random_model(rng, batch);
    const ModelSpec spec = parse_model_spec(text, "random model " + std::to_string(trial));
    const int n = batch > 1 && trial % 3 == 0 ? batch - 1 : batch;  // some with padding
    INFO("model " << trial << ", batch " << batch << ", " << n << " valid:\n" << text);
    Pair p = make_pair(spec, batch, n, rng);
    compare_step(spec, p, "random model " + std::to_string(trial));
    // A second step after a parameter change checks that uploads reach the device.
    for (int t = 0; t < int(spec.tensors.size()); ++t) {
      for (std::int64_t i = 0; i < spec.tensors[t].numel; i += 3) p.cpu->param(t)[i] *= 0.5f;
      std::copy(p.cpu->param(t), p.cpu->param(t) + spec.tensors[t].numel, p.gpu->param(t));
      p.cpu->params_updated(t);
      p.gpu->params_updated(t);
    }
    compare_step(spec, p, "random model " + std::to_string(trial) + " after an update");
  }
}

TEST_CASE("the shipped models match the cpu backend on the gpu", "[gpu]") {
  std::mt19937 rng(5);
  for (const std::string name : {"mlp", "lenet5", "cnn-cifar"}) {
    const ModelSpec spec = load_model(name);
    Pair p = make_pair(spec, 4, 4, rng);
    compare_step(spec, p, name);
  }
}

TEST_CASE("the gpu sgd step updates parameters as core/optimizer does", "[gpu]") {
  std::mt19937 rng(9);
  const ModelSpec spec = load_model("lenet5");
  Pair p = make_pair(spec, 8, 8, rng);
  std::vector<std::vector<float>> vc, vg;
  for (const auto& t : spec.tensors) vc.emplace_back(t.numel, 0.0f), vg.emplace_back(t.numel, 0.0f);
  const SgdOptions sgd{0.05f, 0.9f, 1e-3f};
  for (int step = 0; step < 3; ++step) {
    for (auto* net : {p.cpu.get(), p.gpu.get()}) {
      net->forward_all();
      net->compute_loss();
      net->backward_all();
    }
    p.cpu->sgd_step(sgd, vc);
    p.gpu->sgd_step(sgd, vg);
  }
  for (int t = 0; t < int(spec.tensors.size()); ++t) {
    const auto n = std::size_t(spec.tensors[t].numel);
    check_close(std::vector<float>(p.gpu->param(t), p.gpu->param(t) + n),
                std::vector<float>(p.cpu->param(t), p.cpu->param(t) + n),
                "parameters of " + spec.tensors[t].name + " after 3 steps");
  }
}

TEST_CASE("a short gpu training run on synthetic data lowers the loss", "[gpu]") {
  ModelSpec spec = load_model("lenet5");
  workloads::SyntheticOptions so;
  so.shape = spec.input;
  so.train = 640;
  so.test = 200;
  auto data = workloads::make_synthetic(so);
  workloads::standardize(data);
  const int batch = 32;
  auto net = worker::make_net("gpu", spec, batch, 3);
  std::vector<std::vector<float>> vel;
  for (const auto& t : spec.tensors) vel.emplace_back(t.numel, 0.0f);
  const SgdOptions sgd{0.05f, 0.9f, 0.0f};
  const double acc_before = worker::evaluate_accuracy(*net, data.test);
  std::vector<float> losses;
  for (int epoch = 0; epoch < 6; ++epoch)
    for (std::size_t s = 0; s + batch <= data.train.size(); s += batch) {
      net->set_batch(data.train.image(s), data.train.labels.data() + s, batch);
      net->forward_all();
      losses.push_back(net->compute_loss().loss);
      net->backward_all();
      net->sgd_step(sgd, vel);
    }
  const float first = std::accumulate(losses.begin(), losses.begin() + 5, 0.0f) / 5;
  const float last = std::accumulate(losses.end() - 5, losses.end(), 0.0f) / 5;
  INFO("loss first 5 steps " << first << ", last 5 steps " << last);
  CHECK(last < 0.5f * first);
  const double acc_after = worker::evaluate_accuracy(*net, data.test);
  INFO("test accuracy before " << acc_before << ", after " << acc_after);
  CHECK(acc_after > acc_before + 0.3);
}

TEST_CASE("gpu copies appear in the trace per layer on the h2d and d2h lanes", "[gpu]") {
  std::mt19937 rng(3);
  const ModelSpec spec = load_model("lenet5");
  Pair p = make_pair(spec, 4, 4, rng);
  TraceRecorder trace("worker-test");
  p.gpu->set_trace(&trace, [] { return std::int64_t(41); });
  const double t0 = now_us();
  p.gpu->all_params_updated();
  p.gpu->forward_all();
  p.gpu->compute_loss();
  p.gpu->backward_all();
  const double t1 = now_us();
  for (const LayerSpec& l : spec.layers) {
    if (l.tensors.empty()) continue;
    std::int64_t bytes = 0;
    for (int t : l.tensors) bytes += spec.tensors[t].bytes();
    for (const std::string lane : {"h2d", "d2h"}) {
      const auto events = trace.events();
      auto it = std::find_if(events.begin(), events.end(),
                             [&](const TraceEvent& e) { return e.name == lane + ":" + l.name; });
      INFO(lane << ":" << l.name);
      REQUIRE(it != events.end());
      CHECK(it->lane == lane);
      CHECK(it->bytes == bytes);
      CHECK(it->step == 41);
      CHECK(it->dur_us >= 0);
      // On the host clock, inside the step (a little slack for the event clock's resolution).
      CHECK(it->ts_us >= t0 - 50);
      CHECK(it->ts_us + it->dur_us <= t1 + 50);
    }
  }
}
