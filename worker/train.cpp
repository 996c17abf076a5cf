#include "worker/train.hpp"

#include <omp.h>
#include <sched.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <thread>

#include "core/error.hpp"
#include "core/files.hpp"
#include "ps/stop_signals.hpp"
#include "worker/batcher.hpp"
#include "worker/evaluate.hpp"
#include "worker/net.hpp"
#include "worker/ps_worker.hpp"
#include "workloads/dataset.hpp"

namespace psbed::worker {

using Clock = std::chrono::steady_clock;

void set_compute_threads(int threads) {
  if (threads < 1) throw Error("--threads must be at least 1, got " + std::to_string(threads));
  // More compute threads than CPUs: oneDNN's threads meet at every layer and wait for the ones
  // the kernel has not scheduled, so a step takes several times longer (on 2 CPUs, 4 threads
  // ran lenet5 9x slower than 2). Said once per process, for the largest such count.
  static int warned = 0;
  int cpus = int(std::thread::hardware_concurrency());
  cpu_set_t allowed;  // the CPUs this process may run on, as nproc counts them
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) cpus = CPU_COUNT(&allowed);
  if (cpus > 0 && threads > cpus && threads > warned) {
    warned = threads;
    spdlog::warn(
        "--threads {} is more than this host's {} CPUs: the compute threads wait for each "
        "other, and a step can take many times longer",
        threads, cpus);
  }
  omp_set_num_threads(threads);
}

namespace {
// A float flag as the JSON number it was given (0.05, not 0.05000000074505806).
double json_float(float f) { return std::stod(fmt::format("{}", f)); }
}  // namespace

TrainResult run_train(const TrainOptions& opt) {
  // Before any thread starts (OpenMP's among them), so that all of them leave the stop signals
  // to it.
  ps::StopSignals signals;
  set_compute_threads(opt.threads);
  require_device(opt.device);  // before the data is loaded: a missing GPU fails at once
  ModelSpec spec = load_model(opt.model);
  // Where the results go, checked before the training rather than after it.
  ensure_writable_file(opt.json_out, "--json");
  ensure_writable_file(opt.save_params, "--save-params");
  if (!opt.json_out.empty() && !opt.save_params.empty() &&
      std::filesystem::weakly_canonical(opt.json_out) ==
          std::filesystem::weakly_canonical(opt.save_params))
    throw Error("--json and --save-params name the same file '" + opt.save_params +
                "' (the JSON would overwrite the parameters)");
  auto data = workloads::load_dataset(opt.data, opt.data_dir, spec.input, spec.classes, opt.seed);
  if (opt.standardize) workloads::standardize(data);
  const auto& train = data.train;
  if (train.size() < static_cast<std::size_t>(opt.batch))
    throw Error("training set has " + std::to_string(train.size()) +
                " samples, fewer than one batch of " + std::to_string(opt.batch));
  auto net = make_net(opt.device, spec, opt.batch, opt.seed);
  std::vector<std::vector<float>> velocity;
  for (const auto& t : spec.tensors) velocity.emplace_back(t.numel, 0.0f);

  const std::int64_t steps_per_epoch = std::int64_t(train.size()) / opt.batch;  // = batcher's
  const std::int64_t total = opt.steps > 0 ? opt.steps : steps_per_epoch * opt.epochs;
  if (total < 1) throw Error("nothing to train: give --epochs >= 1 or --steps >= 1");
  scheduled_lr(opt.lr_schedule, opt.sgd.lr, 0, total);  // rejects an unknown schedule up front
  spdlog::info(
      "training {} ({} parameters, {}) on {} on {} with {} thread(s): {} steps of batch {}",
      spec.name, spec.parameter_count(), spec.source, data.description, opt.device, opt.threads,
      total, opt.batch);

  Batcher batcher(train, 0, 1, opt.batch, opt.seed);
  const std::int64_t per = spec.input.numel();
  std::vector<float> images(std::size_t(per) * opt.batch);
  std::vector<std::int32_t> labels(opt.batch);

  TrainResult res;
  res.parameters = spec.parameter_count();
  std::vector<double> recent_loss;
  double first_loss = 0;
  std::vector<double> step_seconds;  // each step's time, evaluation excluded
  auto last_report = Clock::now();
  std::int64_t report_steps = 0;
  double report_seconds = 0;

  std::int64_t done = 0;
  for (std::int64_t step = 0; step < total; ++step) {
    if (const int sig = signals.received(); sig != 0) {
      res.stopped_by = ps::StopSignals::name(sig);
      spdlog::warn("stopped by {} after {} of {} steps: the results are those steps'",
                   res.stopped_by, step, total);
      break;
    }
    const std::int64_t in_epoch = step % steps_per_epoch;
    auto t0 = Clock::now();
    batcher.next(images.data(), labels.data());
    net->set_batch(images.data(), labels.data(), opt.batch);
    net->forward_all();
    LossResult lr = net->compute_loss();
    net->backward_all();
    SgdOptions sgd = opt.sgd;
    sgd.lr = scheduled_lr(opt.lr_schedule, opt.sgd.lr, step, total);
    net->sgd_step(sgd, velocity);  // on the device for the GPU backend
    double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!std::isfinite(lr.loss))
      throw Error("loss diverged (" + std::to_string(lr.loss) + ") at step " +
                  std::to_string(step + 1) + ": lower --lr");
    if (step == 0) first_loss = lr.loss;
    step_seconds.push_back(dt);
    recent_loss.push_back(lr.loss);
    if (recent_loss.size() > 50) recent_loss.erase(recent_loss.begin());
    report_steps++, report_seconds += dt;
    bool epoch_end = in_epoch == steps_per_epoch - 1 && opt.steps <= 0;
    if (std::chrono::duration<double>(Clock::now() - last_report).count() >= opt.progress_every_s ||
        step + 1 == total) {
      spdlog::info("step {:>6}/{}  epoch {:.2f}  loss {:.4f}  {:.0f} images/s", step + 1, total,
                   double(step + 1) / steps_per_epoch, lr.loss,
                   report_steps * opt.batch / report_seconds);
      last_report = Clock::now(), report_steps = 0, report_seconds = 0;
    }
    if (opt.evaluate && (epoch_end || (opt.steps > 0 && step + 1 == total))) {
      res.test_accuracy = evaluate_accuracy(*net, data.test);
      spdlog::info("epoch {:.2f}: test accuracy {:.2f}% on {} samples",
                   double(step + 1) / steps_per_epoch, 100 * res.test_accuracy, data.test.size());
    }
    done = step + 1;
  }
  res.steps = done;
  if (done == 0) throw Error("stopped by " + res.stopped_by + " before the first step");
  // The warm-up rule over the steps done (a run stopped early: those it did).
  const std::int64_t warmup_done =
      std::min<std::int64_t>(std::max<std::int64_t>(3, done / 20), done / 2);
  const double steady_seconds =
      std::accumulate(step_seconds.begin() + warmup_done, step_seconds.end(), 0.0);
  const std::int64_t steady_steps = done - warmup_done;
  if (steady_steps > 0) {
    res.ms_per_step = 1e3 * steady_seconds / steady_steps;
    res.images_per_sec = steady_steps * opt.batch / steady_seconds;
  }
  res.final_loss =
      std::accumulate(recent_loss.begin(), recent_loss.end(), 0.0) / recent_loss.size();
  spdlog::info("done: {} steps, {:.0f} images/s ({:.2f} ms/step) {}, final loss {:.4f}{}", done,
               res.images_per_sec, res.ms_per_step,
               warmup_done > 0 ? "steady" : "(one step: no warm-up to leave out)", res.final_loss,
               res.test_accuracy >= 0
                   ? fmt::format(", test accuracy {:.2f}%", 100 * res.test_accuracy)
                   : "");

  // A loss that grows without becoming infinite: the learning rate overshoots.
  if (done > 1 && res.final_loss > 1.5 * first_loss)
    spdlog::warn("the loss rose from {:.4f} (step 1) to {:.4f} (the last steps): lower --lr",
                 first_loss, res.final_loss);

  if (!opt.save_params.empty()) {
    std::vector<std::vector<float>> tensors;
    for (int t = 0; t < int(spec.tensors.size()); ++t)
      tensors.emplace_back(net->param(t), net->param(t) + spec.tensors[t].numel);
    save_params(opt.save_params, tensors);
  }
  if (!opt.json_out.empty()) {
    nlohmann::json j = {{"model", spec.name},
                        {"model_source", spec.source},
                        {"parameters", res.parameters},
                        {"data", data.description},
                        {"device", opt.device},
                        {"batch", opt.batch},
                        {"threads", opt.threads},
                        {"steps", res.steps},
                        {"planned_steps", total},
                        {"stopped_by", res.stopped_by.empty() ? nlohmann::json(nullptr)
                                                              : nlohmann::json(res.stopped_by)},
                        {"warmup_steps", warmup_done},
                        {"lr", json_float(opt.sgd.lr)},
                        {"lr_schedule", opt.lr_schedule},
                        {"momentum", json_float(opt.sgd.momentum)},
                        {"weight_decay", json_float(opt.sgd.weight_decay)},
                        {"seed", opt.seed},
                        {"images_per_sec", res.images_per_sec},
                        {"ms_per_step", res.ms_per_step},
                        {"final_loss", res.final_loss},
                        {"test_accuracy", res.test_accuracy >= 0 ? nlohmann::json(res.test_accuracy)
                                                                 : nlohmann::json(nullptr)}};
    write_text_file(opt.json_out, j.dump(2) + "\n");
    spdlog::info("results written to {}", opt.json_out);
  }
  return res;
}

}  // namespace psbed::worker
