// `psbed profile`: a single-worker run folder (traces/ and summary.json, as `psbed launch` leaves
// it) turned into a Profile (core/profile.hpp) that the simulator replays and compute replay
// sleeps from.
#pragma once
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/profile.hpp"

namespace psbed::predictor {

struct ProfileOptions {
  std::string run;               // run folder
  std::string worker;            // which worker's trace; required when the run had more than one
  std::int64_t skip_steps = -1;  // warm-up steps left out; < 0: the live worker's rule
  // Fit Profile::message_cost_us so that simulating the run's own configuration (bucket links)
  // gives its measured steps/s; a fit above kMaxPlausibleMessageCostUs is refused (recorded as
  // source.refused_message_cost_us, the cost left at 0).
  bool calibrate = true;
  // Host CPU: ns a byte costs on its way through the host (of the CPU the run's nodes used, this
  // is charged per byte and the rest per message); < 0: measure it now.
  double copy_cpu_ns_per_byte = -1;
};
constexpr double kMaxPlausibleMessageCostUs = 500;
// A refused per-message fit is tried as a host copy cost per byte (Profile::transit_ns_per_byte);
// above this (under 200 MB/s through the host) it is refused too and recorded as
// source.refused_transit_ns_per_byte.
constexpr double kMaxPlausibleTransitNsPerByte = 5;

// Errors name the run folder or trace file and what was expected.
Profile extract_profile(const ProfileOptions& options);

// Profile::host_cv from the time each steady step spent outside compute, in step order: split
// into eighths, the variance of their means beyond what independent steps give (the host's slow
// changes) plus the independent steps' share of a whole run, as a coefficient of variation of
// the mean. 0 for fewer than 16 steps.
double host_cv_of(const std::vector<double>& outside);

// The software time per received message that makes the simulated source configuration (1 worker,
// the run's servers, mode, policy and link, bucket links) run at `steps_per_sec`; 0 if even no
// cost is too slow. Needs profile.source as extract_profile writes it.
double calibrate_message_cost_us(const Profile& profile, double steps_per_sec);
// The same for the host copy cost per byte between the links (message cost as in the profile).
double calibrate_transit_ns_per_byte(const Profile& profile, double steps_per_sec);
// Profile::message_latency_us (a delay per message, no resource) that gives the pace.
double calibrate_message_latency_us(const Profile& profile, double steps_per_sec);
// An unshaped run's one-way latency (Profile::latency_us, the pulls' fit) lowered until the
// simulated source configuration is no slower than `steps_per_sec` (0 at least); the profile's
// own if it already is.
double calibrate_link_latency_us(const Profile& profile, double steps_per_sec);
// The simulated source configuration's steps/s with the profile as it is.
double simulated_source_pace(const Profile& profile);
// Calibration leaves a simulated pace within this fraction of the measured one alone.
constexpr double kCalibrationTolerance = 0.03;

// Fewer steps than this after the warm-up: the profile says its samples are few.
constexpr std::size_t kFewProfiledSteps = 10;
// A profile whose simulation of its own run misses the measured pace by more than this (percent)
// says so in source.warnings: calibrated profiles come within kCalibrationTolerance.
constexpr double kSelfCheckTolerancePct = 10;

// "1.00 Gbit/s, 200 us one way" (a trace's "link" metadata) -> bytes/s and seconds; false if
// the text says "unshaped" or cannot be read.
bool parse_link_metadata(const std::string& text, double* bytes_per_sec, double* latency_s);

// The host's CPU per worker-step over a run's steady steps: every worker's process (a worker
// trace's cpu_steady) and every shard's (a server trace's cpu_samples), over the span in which
// every worker was in its steady steps (each worker's CPU and steps prorated to it). The
// coordinator's few milliseconds are left out. The profile records its run's
// (source.host_cpu_per_step_ms); `psbed validate` sets each run's beside what the simulation of
// its configuration books on the host's cores (SimResult::host_cpu_per_step_s).
struct WorkerSteadyCpu {
  double from_us = 0, to_us = 0, cpu_s = 0;
  double steps = 0;  // steps that ended in [from_us, to_us]
};
struct HostCpu {
  double per_step_s = -1;  // < 0: the traces do not cover it
  double busy_cores = 0;   // the run's processes' CPU over the span, per second of it
};
HostCpu host_cpu_per_step(const std::vector<WorkerSteadyCpu>& workers,
                          const std::vector<nlohmann::json>& server_cpu_samples);
// The same from a run folder's traces (traces/worker-N.trace.json, server-N.trace.json; their
// metadata only). Each worker's steady steps: `per_worker` (summary.json's, by id) where it
// gives them, else its done steps less the warm-up rule of `planned_steps`, the run's step
// count. per_step_s < 0 if a trace is missing or lacks the figures. `worker0_metadata`: that
// trace's metadata where the caller has read it already (a trace is megabytes to parse).
HostCpu run_host_cpu(const std::string& run_dir, int workers, int servers,
                     std::int64_t planned_steps, const nlohmann::json& per_worker = nullptr,
                     const nlohmann::json* worker0_metadata = nullptr);

}  // namespace psbed::predictor
