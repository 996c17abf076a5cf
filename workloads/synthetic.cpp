// The seeded synthetic image set: each class owns a smooth random pattern per channel (a sum of
// a few low-frequency 2-D sinusoids), and a sample is its class pattern plus Gaussian noise,
// clipped to [0, 1]. Needs no files, has any input shape, and a simple classifier learns it.
//
// Determinism: only std::mt19937_64 (whose output the standard fixes) is used; uniform draws,
// the normal draws (Box-Muller) and the shuffle (Fisher-Yates) are written out here rather than
// taken from <random>'s distributions, whose algorithms are implementation-defined. The same
// seed gives bit-identical data with any standard library.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>

#include "core/error.hpp"
#include "core/files.hpp"
#include "workloads/dataset.hpp"

namespace psbed::workloads {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr int kWavesPerChannel = 3;

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// One independent stream per purpose, so that e.g. changing the train count leaves the class
// patterns and the test set unchanged.
class Rng {
 public:
  Rng(std::uint64_t seed, std::uint64_t stream) : gen_(splitmix64(seed ^ splitmix64(stream))) {}
  double uniform() { return double(gen_() >> 11) * 0x1.0p-53; }  // [0, 1)
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  std::uint64_t below(std::uint64_t n) { return gen_() % n; }  // bias < n / 2^64, negligible
  double normal() {
    if (have_spare_) {
      have_spare_ = false;
      return spare_;
    }
    double u1;
    do u1 = uniform();
    while (u1 <= 0.0);
    const double u2 = uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(2.0 * kPi * u2);
    have_spare_ = true;
    return r * std::cos(2.0 * kPi * u2);
  }

 private:
  std::mt19937_64 gen_;
  bool have_spare_ = false;
  double spare_ = 0.0;
};

enum Stream : std::uint64_t { kPatterns = 1, kTrain = 2, kTest = 3 };

// The patterns of classes 0 .. used - 1, used x C x H x W, each in [0.15, 0.85]. Labels are
// i % classes, so a part of n samples uses only the first min(classes, n) classes; the patterns
// come from one stream in class order, so generating fewer leaves those used unchanged.
std::vector<float> make_patterns(const SyntheticOptions& opt, int used) {
  const Shape& s = opt.shape;
  const std::size_t numel = std::size_t(s.numel());
  std::vector<float> patterns(std::size_t(used) * numel);
  Rng rng(opt.seed, kPatterns);
  struct Wave {
    double fx, fy, phase, amp;
  };
  for (int k = 0; k < used; ++k) {
    for (int c = 0; c < s.c; ++c) {
      Wave waves[kWavesPerChannel];
      double amp_sum = 0.0;
      for (Wave& w : waves) {
        // 0.5 to 2.5 cycles across the image in each direction, either orientation.
        w.fx = rng.uniform(0.5, 2.5) * (rng.uniform() < 0.5 ? -1.0 : 1.0);
        w.fy = rng.uniform(0.5, 2.5) * (rng.uniform() < 0.5 ? -1.0 : 1.0);
        w.phase = rng.uniform(0.0, 2.0 * kPi);
        w.amp = rng.uniform(0.5, 1.0);
        amp_sum += w.amp;
      }
      float* out = patterns.data() + std::size_t(k) * numel + std::size_t(c) * s.h * s.w;
      for (int y = 0; y < s.h; ++y) {
        for (int x = 0; x < s.w; ++x) {
          double v = 0.0;
          for (const Wave& w : waves)
            v += w.amp * std::sin(2.0 * kPi * (w.fx * x / s.w + w.fy * y / s.h) + w.phase);
          out[y * s.w + x] = float(0.5 + 0.35 * v / amp_sum);  // v / amp_sum in [-1, 1]
        }
      }
    }
  }
  return patterns;
}

Dataset make_split(const SyntheticOptions& opt, const std::vector<float>& patterns,
                   std::size_t count, Stream stream) {
  Rng rng(opt.seed, stream);
  Dataset d;
  d.shape = opt.shape;
  // Balanced labels (counts differ by at most one between classes), then shuffled.
  d.labels.resize(count);
  for (std::size_t i = 0; i < count; ++i) d.labels[i] = std::int32_t(i % std::size_t(opt.classes));
  for (std::size_t i = count; i > 1; --i) std::swap(d.labels[i - 1], d.labels[rng.below(i)]);

  const std::size_t numel = std::size_t(opt.shape.numel());
  d.images.resize(count * numel);
  const double noise = opt.noise;
  for (std::size_t i = 0; i < count; ++i) {
    const float* pattern = patterns.data() + std::size_t(d.labels[i]) * numel;
    float* out = d.images.data() + i * numel;
    for (std::size_t j = 0; j < numel; ++j) {
      const double v = pattern[j] + noise * rng.normal();
      out[j] = float(std::clamp(v, 0.0, 1.0));
    }
  }
  return d;
}

}  // namespace

void check_synthetic(const SyntheticOptions& opt) {
  const Shape& s = opt.shape;
  if (s.c <= 0 || s.h <= 0 || s.w <= 0)
    throw Error("synthetic data: bad sample shape " + s.str() + ", expected positive C x H x W");
  if (opt.classes < 2)
    throw Error("synthetic data: " + std::to_string(opt.classes) + " classes, expected at least 2");
  if (!(opt.noise >= 0.0f) || !std::isfinite(opt.noise))
    throw Error("synthetic data: noise " + std::to_string(opt.noise) +
                ", expected a finite value >= 0");
  const std::uint64_t numel = std::uint64_t(s.numel());
  const std::uint64_t samples = std::uint64_t(opt.train) + opt.test;
  if (samples > (std::uint64_t(1) << 40) / numel)
    throw Error("synthetic data: " + std::to_string(samples) + " samples of " + s.str() +
                " is too large, expected at most 2^40 floats in all");
  // Made whole in memory: a large input (3x224x224: 6 GB for 10,000 samples) would be killed for
  // memory halfway rather than refused.
  const std::uint64_t need = samples * numel * sizeof(float);
  if (const std::uint64_t have = available_memory_bytes(); have > 0 && need > have)
    throw Error("synthetic data: " + std::to_string(samples) + " samples of " + s.str() + " take " +
                format_memory(need) + ", more than the " + format_memory(have) +
                " of memory available (expected a smaller input shape)");
}

Split make_synthetic(const SyntheticOptions& opt) {
  check_synthetic(opt);
  const Shape& s = opt.shape;
  const std::size_t most = std::max(opt.train, opt.test);
  const int used = int(std::min<std::size_t>(std::size_t(opt.classes), most));
  const std::vector<float> patterns = make_patterns(opt, used);
  Split split;
  split.train = make_split(opt, patterns, opt.train, kTrain);
  split.test = make_split(opt, patterns, opt.test, kTest);
  std::ostringstream os;
  os << "synthetic " << s.str() << ", " << opt.classes << " classes, seed " << opt.seed << " ("
     << opt.train << " train / " << opt.test << " test)";
  split.description = os.str();
  return split;
}

}  // namespace psbed::workloads
