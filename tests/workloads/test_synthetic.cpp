// The seeded synthetic image set: deterministic, well-formed, and learnable.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/error.hpp"
#include "workloads/dataset.hpp"

using psbed::Shape;
using namespace psbed::workloads;

namespace test_synthetic {

SyntheticOptions small(std::uint64_t seed) {
  SyntheticOptions o;
  o.shape = Shape{3, 8, 9};
  o.train = 500;
  o.test = 120;
  o.seed = seed;
  return o;
}

std::vector<std::size_t> class_counts(const Dataset& d, int classes) {
  std::vector<std::size_t> counts(std::size_t(classes), 0);
  for (auto l : d.labels) {
    if (l < 0 || l >= classes) FAIL("label " << l << " outside [0, " << classes << ")");
    ++counts[std::size_t(l)];
  }
  return counts;
}

// Accuracy on `test` of the classifier that picks the class whose training mean is nearest.
double nearest_mean_accuracy(const Dataset& train, const Dataset& test, int classes) {
  const std::size_t numel = std::size_t(train.shape.numel());
  std::vector<double> means(std::size_t(classes) * numel, 0.0);
  std::vector<std::size_t> counts(std::size_t(classes), 0);
  for (std::size_t i = 0; i < train.size(); ++i) {
    const auto k = std::size_t(train.labels[i]);
    ++counts[k];
    const float* x = train.image(i);
    for (std::size_t j = 0; j < numel; ++j) means[k * numel + j] += x[j];
  }
  for (std::size_t k = 0; k < std::size_t(classes); ++k)
    for (std::size_t j = 0; j < numel; ++j) means[k * numel + j] /= double(counts[k]);

  std::size_t correct = 0;
  for (std::size_t i = 0; i < test.size(); ++i) {
    const float* x = test.image(i);
    double best = std::numeric_limits<double>::max();
    int best_k = -1;
    for (int k = 0; k < classes; ++k) {
      double d = 0.0;
      for (std::size_t j = 0; j < numel; ++j) {
        const double diff = x[j] - means[std::size_t(k) * numel + j];
        d += diff * diff;
      }
      if (d < best) best = d, best_k = k;
    }
    correct += best_k == test.labels[i];
  }
  return double(correct) / double(test.size());
}

}  // namespace test_synthetic

using namespace test_synthetic;

TEST_CASE("synthetic: the same seed gives identical data", "[workloads][synthetic]") {
  const Split a = make_synthetic(small(7));
  const Split b = make_synthetic(small(7));
  CHECK(a.train.labels == b.train.labels);
  CHECK(a.train.images == b.train.images);
  CHECK(a.test.labels == b.test.labels);
  CHECK(a.test.images == b.test.images);
  CHECK(a.description == b.description);
}

TEST_CASE("synthetic: a different seed gives different data", "[workloads][synthetic]") {
  const Split a = make_synthetic(small(7));
  const Split b = make_synthetic(small(8));
  CHECK(a.train.images != b.train.images);
  CHECK(a.test.images != b.test.images);
  CHECK(a.train.labels != b.train.labels);
}

TEST_CASE("synthetic: shape, counts and value range", "[workloads][synthetic]") {
  const SyntheticOptions o = small(3);
  const Split s = make_synthetic(o);
  for (const Dataset* d : {&s.train, &s.test}) {
    CHECK(d->shape.c == o.shape.c);
    CHECK(d->shape.h == o.shape.h);
    CHECK(d->shape.w == o.shape.w);
    CHECK(d->images.size() == d->size() * std::size_t(o.shape.numel()));
    const auto [lo, hi] = std::minmax_element(d->images.begin(), d->images.end());
    CHECK(*lo >= 0.0f);
    CHECK(*hi <= 1.0f);
    CHECK(*hi - *lo > 0.5f);  // not constant
  }
  CHECK(s.train.size() == o.train);
  CHECK(s.test.size() == o.test);
  CHECK(!s.description.empty());
}

TEST_CASE("synthetic: every class is in both parts, in balanced numbers, shuffled",
          "[workloads][synthetic]") {
  SyntheticOptions o = small(11);
  o.classes = 7;
  const Split s = make_synthetic(o);
  for (const Dataset* d : {&s.train, &s.test}) {
    const auto counts = class_counts(*d, o.classes);
    const auto [lo, hi] = std::minmax_element(counts.begin(), counts.end());
    CHECK(*lo > 0);
    CHECK(*hi - *lo <= 1);
    // Shuffled: not simply 0, 1, 2, ... repeating.
    std::size_t in_order = 0;
    for (std::size_t i = 0; i < d->size(); ++i)
      in_order += d->labels[i] == int(i % std::size_t(o.classes));
    CHECK(in_order < d->size() / 2);
  }
}

TEST_CASE("synthetic: a nearest-class-mean classifier learns it", "[workloads][synthetic]") {
  SECTION("the default options (3 x 32 x 32, 8000 / 2000)") {
    const SyntheticOptions o;
    const Split s = make_synthetic(o);
    const double acc = nearest_mean_accuracy(s.train, s.test, o.classes);
    INFO("accuracy " << acc);
    CHECK(acc >= 0.8);
  }
  SECTION("digit-shaped input (1 x 28 x 28)") {
    SyntheticOptions o;
    o.shape = Shape{1, 28, 28};
    o.train = 2000;
    o.test = 500;
    o.seed = 42;
    const Split s = make_synthetic(o);
    const double acc = nearest_mean_accuracy(s.train, s.test, o.classes);
    INFO("accuracy " << acc);
    CHECK(acc >= 0.8);
  }
}

TEST_CASE("synthetic: bad options are errors", "[workloads][synthetic]") {
  SyntheticOptions o = small(1);
  o.shape = Shape{0, 8, 8};
  REQUIRE_THROWS_AS(make_synthetic(o), psbed::Error);
  REQUIRE_THROWS_WITH(make_synthetic(o), Catch::Contains("0x8x8"));
  o = small(1);
  o.classes = 1;
  REQUIRE_THROWS_WITH(make_synthetic(o), Catch::Contains("classes"));
}

TEST_CASE("synthetic: the check without making refuses what making refuses",
          "[workloads][synthetic]") {
  const Shape good{1, 28, 28};
  REQUIRE_NOTHROW(check_dataset("synthetic", "", good, 10, 1));
  REQUIRE_THROWS_WITH(check_dataset("synthetic", "", Shape{0, 8, 8}, 10, 1),
                      Catch::Contains("0x8x8"));
  REQUIRE_THROWS_WITH(check_dataset("synthetic", "", good, 1, 1), Catch::Contains("classes"));
  REQUIRE_THROWS_WITH(check_dataset("synthetic", "", Shape{1 << 20, 1 << 20, 2}, 10, 1),
                      Catch::Contains("too large"));
  REQUIRE_THROWS_WITH(check_dataset("cifar", "", good, 10, 1),
                      Catch::Contains("unknown data set 'cifar'"));
}

TEST_CASE("synthetic: more classes than samples makes patterns only for the classes used",
          "[workloads][synthetic]") {
  // 2^24 classes of 1 x 5 x 5 would be 1.6 GB of patterns; 40 samples use 40 of them.
  SyntheticOptions o;
  o.shape = Shape{1, 5, 5};
  o.train = 40;
  o.test = 10;
  o.classes = 1 << 24;
  const Split s = make_synthetic(o);
  std::vector<std::int32_t> labels = s.train.labels;
  std::sort(labels.begin(), labels.end());
  CHECK(std::adjacent_find(labels.begin(), labels.end()) == labels.end());  // all distinct
  CHECK(labels.back() == 39);
  // The classes a smaller class count also has look the same.
  SyntheticOptions few = o;
  few.classes = 40;
  CHECK(make_synthetic(few).train.images == s.train.images);
}
