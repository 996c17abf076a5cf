// A measured run as psbed validate (and profile --contention-run) reads it: its summary.json
// and worker-0's trace metadata turned into the configuration that predicts it, with what the
// run recorded beside it (its link, the settings a flag may replace, its host's CPU).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "core/profile.hpp"
#include "predictor/commands.hpp"
#include "predictor/profile_extract.hpp"
#include "predictor/simulator.hpp"

namespace psbed::predictor {

// The link a run recorded (its traces' metadata, or summary.json's launch), in bytes/s and
// seconds one way; `known` is false for an older run that recorded none.
struct RecordedLink {
  bool known = false;
  std::string text;                   // as recorded: "1.00 Gbit/s, 200 us one way", "unshaped"
  double bandwidth = 0, latency = 0;  // bytes/s and s as recorded (0 for an unshaped run)
  // What the run is predicted on where no --bandwidth or --latency replaces it (an unshaped run:
  // the profile's estimate of the host's link where the profile's run was unshaped too).
  double own_bandwidth = 0, own_latency = 0;
};

struct MeasuredRun {
  std::string run;
  nlohmann::json summary;
  SimConfig config;
  double measured = 0;
  std::string skipped;  // why the run is no measurement (it failed), empty if it is one
  HostCpu host;         // its host CPU per worker-step, where comparable with the simulation's
  RecordedLink link;
  // What the run recorded of the settings a flag may replace in its prediction (--steps,
  // --start-stagger-ms, --compute, --host-cpus): runs that differ in them are no repeats of one
  // configuration, even where the flags predict them alike.
  nlohmann::json recorded = nlohmann::json::object();
};

// A measured run's configuration, from its summary.json and a worker trace's metadata (the
// link and the policy parameters live there; runs launched without traces have them in
// summary.json), on `base` where the run says nothing and `flags` where they replace it. Errors
// name the run folder; a run that failed comes back with `skipped` set.
MeasuredRun read_run(const std::string& dir, const Profile& profile, const SimConfig& base,
                     const SimFlags& flags);

// What makes two runs repeats of one configuration: everything the prediction is made from,
// and what the runs recorded (their summary's model and batch, their link and the settings a
// flag may replace): runs that differ in what they measured are never merged into one median,
// even where --bandwidth, --latency or --steps predict them alike.
std::string config_key(const MeasuredRun& m);

}  // namespace psbed::predictor
