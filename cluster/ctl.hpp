// `psbed ctl`: talk to a running cluster's coordinator. `policy NAME [...]` switches every
// worker's transmission policy at its next step boundary and prints the step from which the
// whole cluster runs it; `comm MODE` switches --comm (ps, sfb, hybrid) at a step every worker
// takes together; `status` prints what the cluster runs now.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace psbed::cluster {

struct CtlOptions {
  std::string coordinator;  // endpoint, or:
  std::string run;          // a `psbed launch` run folder (its logs/coordinator.endpoint)
  std::string policy;
  std::int64_t slice_params = 0, partition_params = 0;  // 0: keep the policy's
  std::string credit;
  std::string comm;   // `ctl comm MODE`
  std::string token;  // the coordinator's --http-token, where it has one
  double timeout_s = 45;
  bool json = false;
  std::string keys;      // CURVE key folder (default with --run: RUN/keys when there)
  std::string key_file;  // default <keys>/ctl.key
};

void add_ctl(CLI::App& root, CtlOptions& o, std::string& log_level);
int run_ctl(CLI::App& root, const CtlOptions& o);

}  // namespace psbed::cluster
