#include "worker/bench_compute.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/model_spec.hpp"
#include "core/optimizer.hpp"
#include "core/run_program.hpp"
#include "worker/net.hpp"
#include "worker/train.hpp"

#ifndef PSBED_SOURCE_DIR
#define PSBED_SOURCE_DIR "."
#endif

namespace psbed::worker {
namespace {

using Clock = std::chrono::steady_clock;

struct Row {
  std::string model;
  int threads = 0, batch = 0, steps = 0;
  double ms_mean = 0, ms_median = 0, images_per_sec = 0;
  double torch_images_per_sec = -1, torch_ms_median = -1;
  double gpu_images_per_sec = -1, gpu_ms_median = -1;  // --device gpu: the model on the GPU
};

// threads only matters on the CPU (a GPU step is the device's work plus one host thread).
Row bench_one(const BenchComputeOptions& opt, const std::string& device, const ModelSpec& spec,
              int threads, int batch) {
  set_compute_threads(threads);
  auto net = make_net(device, spec, batch, 1);
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  std::vector<float> images(std::size_t(spec.input.numel()) * batch);
  for (auto& v : images) v = u(rng);
  std::vector<std::int32_t> labels(batch);
  for (auto& l : labels) l = std::int32_t(rng() % spec.classes);
  std::vector<std::vector<float>> velocity;
  for (const auto& t : spec.tensors) velocity.emplace_back(t.numel, 0.0f);
  SgdOptions sgd{0.01f, 0.9f, 0.0f};
  auto step = [&] {
    net->set_batch(images.data(), labels.data(), batch);
    net->forward_all();
    net->compute_loss();
    net->backward_all();
    net->sgd_step(sgd, velocity);
  };
  for (int i = 0; i < opt.warmup; ++i) step();
  std::vector<double> ms;
  auto start = Clock::now();
  while (ms.empty() || int(ms.size()) < opt.min_steps ||
         std::chrono::duration<double>(Clock::now() - start).count() < opt.min_seconds) {
    auto t0 = Clock::now();
    step();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  Row r;
  r.model = spec.name, r.threads = threads, r.batch = batch, r.steps = int(ms.size());
  double sum = 0;
  for (double m : ms) sum += m;
  r.ms_mean = sum / ms.size();
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  r.ms_median = ms[ms.size() / 2];
  r.images_per_sec = batch * 1e3 / r.ms_mean;
  return r;
}

// Runs the PyTorch reference for one model; returns its rows keyed by thread count, or an
// empty map with the reason in `note` when it could not run; `unavailable` is set when it cannot
// run for any model (no script, no PyTorch).
std::map<int, nlohmann::json> bench_torch(const BenchComputeOptions& opt, const std::string& model,
                                          int batch, std::string& note, bool& unavailable) {
  namespace fs = std::filesystem;
  std::string script = std::string(PSBED_SOURCE_DIR) + "/cluster/bench_torch.py";
  if (const char* env = std::getenv("PSBED_TORCH_BENCH")) script = env;
  if (!fs::exists(script)) {
    note = "PyTorch reference skipped: " + script + " not found";
    unavailable = true;
    return {};
  }
  std::string threads;
  for (int t : opt.threads) threads += (threads.empty() ? "" : ",") + std::to_string(t);
  fs::path tmp =
      fs::temp_directory_path() / ("psbed-torch-" + std::to_string(::getpid()) + ".json");
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.2f", opt.min_seconds);
  std::vector<std::string> argv = {opt.python, script, "--models", model, "--threads", threads};
  if (opt.batch > 0) argv.insert(argv.end(), {"--batch", std::to_string(batch)});
  argv.insert(argv.end(), {"--min-seconds", secs, "--min-steps", std::to_string(opt.min_steps),
                           "--warmup", std::to_string(opt.warmup), "--json", tmp.string()});
  ProgramOptions to_stderr;  // its progress stays out of the table on stdout
  to_stderr.stdout_to_stderr = true;
  const ProgramStatus rc = run_program(argv, to_stderr);
  if (!rc.ok() || !fs::exists(tmp)) {
    // bench_torch.py exits with 3 when it cannot import torch.
    if (rc.exited_with(3)) {
      note = "PyTorch reference skipped: " + opt.python +
             " cannot import torch (make bench installs Debian's python3-torch and OpenBLAS)";
      unavailable = true;
    } else {
      const std::string how = rc.ok() ? "wrote no results" : rc.describe();
      const std::string before = note.rfind("PyTorch reference skipped", 0) == 0 ? note + "; " : "";
      note = before + "PyTorch reference skipped for " + model + ": `" + command_text(argv) + "` " +
             how;
      unavailable = !rc.started;  // no interpreter: the next model would fail alike
    }
    return {};
  }
  std::ifstream in(tmp);
  nlohmann::json j = nlohmann::json::parse(in);
  fs::remove(tmp);
  note = "PyTorch " + j.value("torch_version", std::string("?")) +
         ", BLAS: " + j.value("blas", std::string("?"));
  std::map<int, nlohmann::json> out;
  for (const auto& row : j.at("rows")) out[row.at("threads").get<int>()] = row;
  return out;
}

}  // namespace

int run_bench_compute(const BenchComputeOptions& opt) {
  if (opt.device != "cpu" && opt.device != "gpu")
    throw Error("unknown device '" + opt.device + "', expected cpu or gpu");
  const bool gpu = opt.device == "gpu";
  if (gpu) require_device("gpu");  // before any CPU row: no half-finished table without a device
  if (opt.models.empty()) throw Error("bench compute: --models: expected at least one model");
  for (int t : opt.threads)
    if (t < 1)
      throw Error("bench compute: --threads " + std::to_string(t) + ": expected 1 or more");
  if (opt.batch < 0)
    throw Error("bench compute: --batch " + std::to_string(opt.batch) +
                ": expected 1 or more, or 0 for the default");
  if (opt.min_steps < 1)
    throw Error("bench compute: --min-steps " + std::to_string(opt.min_steps) +
                ": expected 1 or more");
  if (opt.warmup < 0)
    throw Error("bench compute: --warmup " + std::to_string(opt.warmup) + ": expected 0 or more");
  if (!(opt.min_seconds >= 0) || !std::isfinite(opt.min_seconds))
    throw Error("bench compute: --min-seconds: expected a number of seconds, 0 or more");
  ensure_writable_file(opt.json_out, "--json");  // before the rows, not after
  std::vector<Row> rows;
  std::string torch_note = opt.torch ? "" : "PyTorch reference off (--no-torch)";
  bool torch_unavailable = !opt.torch;
  // Every spec read before the first row: a bad one is refused before anything is timed.
  std::vector<ModelSpec> specs;
  for (const auto& name : opt.models) specs.push_back(load_model(name));
  std::vector<std::string> no_reference;  // custom specs: bench_torch.py builds the shipped ones
  for (const ModelSpec& spec : specs) {
    int batch = opt.batch > 0 ? opt.batch : (spec.input.h * spec.input.w <= 28 * 28 ? 64 : 32);
    std::vector<Row> model_rows;
    for (int t : opt.threads) {
      spdlog::info("psbed {} batch {} threads {} ...", spec.name, batch, t);
      model_rows.push_back(bench_one(opt, "cpu", spec, t, batch));
    }
    if (gpu) {
      spdlog::info("psbed {} batch {} on the GPU ...", spec.name, batch);
      const Row g = bench_one(opt, "gpu", spec, 1, batch);
      for (auto& r : model_rows)
        r.gpu_images_per_sec = g.images_per_sec, r.gpu_ms_median = g.ms_median;
    }
    // The PyTorch reference builds a shipped model by its name, so a spec of its own (even one
    // that took a shipped model's name) has none.
    bool shipped = false;
    for (const std::string& n : shipped_model_names())
      if (n == spec.name)
        shipped = std::filesystem::weakly_canonical(load_model(n).source) ==
                  std::filesystem::weakly_canonical(spec.source);
    if (!torch_unavailable && !shipped) no_reference.push_back(spec.source);
    if (!torch_unavailable && shipped) {
      spdlog::info("pytorch {} batch {} ...", spec.name, batch);
      auto torch = bench_torch(opt, spec.name, batch, torch_note, torch_unavailable);
      for (auto& r : model_rows)
        if (auto it = torch.find(r.threads); it != torch.end()) {
          r.torch_images_per_sec = it->second.at("images_per_sec").get<double>();
          r.torch_ms_median = it->second.at("ms_per_step_median").get<double>();
        }
    }
    rows.insert(rows.end(), model_rows.begin(), model_rows.end());
  }

  std::printf("\n%-10s %7s %5s %12s %12s %12s %12s %8s", "model", "threads", "batch", "psbed ms",
              "psbed img/s", "torch ms", "torch img/s", "ratio");
  if (gpu) std::printf(" %10s %12s %8s", "gpu ms", "gpu img/s", "gpu/cpu");
  std::printf("\n");
  for (const auto& r : rows) {
    if (r.torch_images_per_sec > 0)
      std::printf("%-10s %7d %5d %12.2f %12.0f %12.2f %12.0f %7.2fx", r.model.c_str(), r.threads,
                  r.batch, r.ms_median, r.images_per_sec, r.torch_ms_median, r.torch_images_per_sec,
                  r.images_per_sec / r.torch_images_per_sec);
    else
      std::printf("%-10s %7d %5d %12.2f %12.0f %12s %12s %8s", r.model.c_str(), r.threads, r.batch,
                  r.ms_median, r.images_per_sec, "-", "-", "-");
    if (gpu)
      std::printf(" %10.2f %12.0f %7.1fx", r.gpu_ms_median, r.gpu_images_per_sec,
                  r.gpu_images_per_sec / r.images_per_sec);
    std::printf("\n");
  }
  std::printf(
      "(ms = median ms/step; img/s = batch / mean step time; ratio = psbed / PyTorch images/s%s)\n",
      gpu ? "; gpu = the same step on the GPU, beside each CPU row of its model" : "");
  if (!no_reference.empty()) {
    std::string list;
    for (const std::string& src : no_reference) list += (list.empty() ? "" : ", ") + src;
    torch_note += (torch_note.empty() ? "" : "; ") +
                  std::string("no PyTorch reference for a model spec of its own (") + list +
                  "): cluster/bench_torch.py builds the shipped models";
  }
  if (!torch_note.empty()) std::printf("%s\n", torch_note.c_str());

  if (!opt.json_out.empty()) {
    nlohmann::json j = {
        {"device", opt.device}, {"reference", torch_note}, {"rows", nlohmann::json::array()}};
    for (const auto& r : rows) {
      nlohmann::json row = {{"model", r.model},
                            {"threads", r.threads},
                            {"batch", r.batch},
                            {"steps", r.steps},
                            {"ms_per_step", r.ms_mean},
                            {"ms_per_step_median", r.ms_median},
                            {"images_per_sec", r.images_per_sec}};
      if (r.gpu_images_per_sec > 0) {
        row["gpu_images_per_sec"] = r.gpu_images_per_sec;
        row["gpu_ms_per_step_median"] = r.gpu_ms_median;
      }
      if (r.torch_images_per_sec > 0) {
        row["torch_images_per_sec"] = r.torch_images_per_sec;
        row["torch_ms_per_step_median"] = r.torch_ms_median;
        row["ratio"] = r.images_per_sec / r.torch_images_per_sec;
      }
      j["rows"].push_back(row);
    }
    write_text_file(opt.json_out, j.dump(2) + "\n");
    spdlog::info("results written to {}", opt.json_out);
  }
  return 0;
}

}  // namespace psbed::worker
