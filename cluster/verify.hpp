// `psbed optimize --verify`: rank the configurations by simulation, then launch the best one on
// this host and print what it measured beside what was predicted for it.
#pragma once
#include <cstdint>
#include <string>

#include "predictor/commands.hpp"

namespace psbed::cluster {

struct VerifyOptions {
  bool enabled = false;
  std::string data = "synthetic";  // what the launched workers train on
  std::int64_t steps = 60;         // steps per worker of the verifying run
  std::string compute;             // "" = replay:<the profile> (many workers fit on few cores)
  std::string out;                 // run folder; "" = runs/verify-<model>-<W>w<S>s-<time>
  double timeout_s = 1800;
};

// Runs `psbed optimize` and, if v.enabled, the verifying launch. Returns the exit status.
int run_optimize_verify(const predictor::OptimizeOptions& o, const VerifyOptions& v);

}  // namespace psbed::cluster
