#include <catch2/catch.hpp>
#include <numeric>

#include "core/model_spec.hpp"
#include "core/optimizer.hpp"
#include "worker/evaluate.hpp"
#include "worker/net.hpp"
#include "workloads/dataset.hpp"

using namespace psbed;

TEST_CASE("a short training run on synthetic data lowers the loss", "[worker][training]") {
  ModelSpec spec = load_model("lenet5");
  workloads::SyntheticOptions so;
  so.shape = spec.input;
  so.train = 640;
  so.test = 200;
  auto data = workloads::make_synthetic(so);
  workloads::standardize(data);
  const int batch = 32;
  auto net = worker::make_cpu_net(spec, batch, 3);
  std::vector<std::vector<float>> vel;
  for (const auto& t : spec.tensors) vel.emplace_back(t.numel, 0.0f);
  SgdOptions sgd{0.05f, 0.9f, 0.0f};
  const double acc_before = worker::evaluate_accuracy(*net, data.test);
  std::vector<float> losses;
  const std::int64_t per = spec.input.numel();
  for (int epoch = 0; epoch < 6; ++epoch)
    for (size_t s = 0; s + batch <= data.train.size(); s += batch) {
      net->set_batch(data.train.image(s), data.train.labels.data() + s, batch);
      net->forward_all();
      losses.push_back(net->compute_loss().loss);
      net->backward_all();
      for (int t = 0; t < int(spec.tensors.size()); ++t) {
        sgd_apply(sgd, net->param(t), net->grad(t), vel[t].data(), spec.tensors[t].numel);
        net->params_updated(t);
      }
    }
  (void)per;
  const float first = std::accumulate(losses.begin(), losses.begin() + 5, 0.0f) / 5;
  const float last = std::accumulate(losses.end() - 5, losses.end(), 0.0f) / 5;
  INFO("loss first 5 steps " << first << ", last 5 steps " << last);
  CHECK(last < 0.5f * first);
  const double acc_after = worker::evaluate_accuracy(*net, data.test);
  INFO("test accuracy before " << acc_before << ", after " << acc_after);
  CHECK(acc_after > acc_before + 0.3);
}

TEST_CASE("padding samples past n do not change the loss or the gradients", "[worker][training]") {
  ModelSpec spec = load_model("mlp");
  auto a = worker::make_cpu_net(spec, 4, 5);
  auto b = worker::make_cpu_net(spec, 8, 5);
  std::vector<float> x(spec.input.numel() * 8, 0.25f);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float((i * 37) % 101) / 101.0f;
  std::vector<std::int32_t> y = {1, 2, 3, 4, 5, 6, 7, 8};
  a->set_batch(x.data(), y.data(), 4);
  b->set_batch(x.data(), y.data(), 4);  // 4 valid, 4 padding
  a->forward_all();
  b->forward_all();
  auto la = a->compute_loss(), lb = b->compute_loss();
  CHECK(la.loss == Approx(lb.loss).epsilon(1e-5));
  CHECK(la.correct == lb.correct);
  a->backward_all();
  b->backward_all();
  for (int t = 0; t < int(spec.tensors.size()); ++t)
    for (std::int64_t i = 0; i < spec.tensors[t].numel; i += 997)
      CHECK(a->grad(t)[i] == Approx(b->grad(t)[i]).margin(1e-6));
}
