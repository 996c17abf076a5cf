// The consistency model of a training run, as the live shard enforces it (ps/store.cpp) and the
// simulator replays it (predictor/simulator.hpp). One type for both sides, so a mode the testbed
// accepts is a mode the predictor accepts, named alike.
#pragma once
#include <string>

namespace psbed {

// async: apply each gradient on arrival. bsp: average one gradient per worker per clock, apply,
// then answer pulls of the next clock (a pull for clock c waits until every worker's clock c-1
// gradient of that part is applied). ssp:K: apply on arrival; a pull for clock c waits until
// every worker completed clock c - K (the fastest runs at most K clocks ahead).
//
// Default async, as a live cluster runs unless told; the predictor's SimConfig declares its own
// default (bsp) where it declares the field, as ps::Experiment declares async.
struct Consistency {
  enum class Kind { kAsync, kBsp, kSsp };
  Kind kind = Kind::kAsync;
  int staleness = 0;  // K for ssp
  static Consistency parse(
      const std::string& text);  // "async", "bsp", "ssp:2"; throws Error naming the text
  std::string str() const;
};

}  // namespace psbed
