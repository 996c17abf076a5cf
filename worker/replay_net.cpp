#include "worker/replay_net.hpp"

#include <sys/prctl.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "core/error.hpp"
#include "core/param_init.hpp"

namespace psbed::worker {

std::string replay_profile_path(const std::string& compute) {
  if (compute.empty() || compute == "real") return "";
  const std::string prefix = "replay:";
  if (compute.rfind(prefix, 0) == 0 && compute.size() > prefix.size())
    return compute.substr(prefix.size());
  throw Error("--compute '" + compute + "': expected real or replay:<profile.json>");
}

namespace {

// Sleeps to an absolute deadline on the monotonic clock: a relative sleep would add the timer
// slack and the call's own cost to every one of a step's dozens of layers.
void sleep_for_s(double seconds) {
  if (seconds <= 0) return;
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  const long long ns = t.tv_nsec + static_cast<long long>(seconds * 1e9);
  t.tv_sec += ns / 1000000000LL;
  t.tv_nsec = ns % 1000000000LL;
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, nullptr) == EINTR) {
  }
}

class ReplayNet final : public Net {
 public:
  ReplayNet(const ModelSpec& spec, int batch, std::uint64_t seed, const Profile& profile,
            double compute_factor)
      : spec_(spec),
        batch_(batch),
        profile_(profile),
        sampler_(profile_, seed * 0x9E3779B97F4A7C15ULL + 11),
        scale_(compute_factor * double(batch) / double(profile.batch)) {
    // The default timer slack (50 us) would stretch every short layer; replay wants its sleeps
    // exact.
    ::prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    for (int t = 0; t < int(spec_.tensors.size()); ++t) {
      params_.emplace_back(std::size_t(spec_.tensors[t].numel));
      init_tensor(spec_, t, seed, params_.back().data());
      grads_.emplace_back(std::size_t(spec_.tensors[t].numel), 0.0f);
    }
  }
  const ModelSpec& spec() const override { return spec_; }
  int batch() const override { return batch_; }
  std::string device() const override { return "replay"; }
  float* param(int t) override { return params_.at(std::size_t(t)).data(); }
  const float* grad(int t) const override { return grads_.at(std::size_t(t)).data(); }
  void params_updated(int) override {}
  void set_batch(const float*, const std::int32_t*, int) override {}
  void forward(int layer) override { sleep_for_s(scale_ * sampler_.forward_s(layer)); }
  LossResult compute_loss() override { return {}; }
  void backward(int layer) override { sleep_for_s(scale_ * sampler_.backward_s(layer)); }
  // Factors of the right size travel and are rebuilt as in a real run; their values are zero.
  void read_factors(int layer, float* x, float* dy) override {
    const LayerSpec& l = spec_.layers.at(std::size_t(layer));
    std::fill(x, x + l.in.numel() * batch_, 0.0f);
    std::fill(dy, dy + l.out.numel() * batch_, 0.0f);
  }

 private:
  ModelSpec spec_;
  int batch_;
  Profile profile_;
  ComputeSampler sampler_;
  double scale_;
  std::vector<std::vector<float>> params_, grads_;
};

}  // namespace

std::unique_ptr<Net> make_replay_net(const ModelSpec& spec, int batch, std::uint64_t seed,
                                     const Profile& profile, const std::string& profile_name,
                                     double compute_factor) {
  profile.check_matches(spec, profile_name);
  return std::make_unique<ReplayNet>(spec, batch, seed, profile, compute_factor);
}

}  // namespace psbed::worker
