// The reference row of `psbed bench ps`: what raw ZeroMQ achieves on this host, one request in
// flight, so the parameter server's own figures can be read as a fraction of it. A DEALER sends
// N bytes, a ROUTER echoes the very frame back, the DEALER receives N bytes: push + pull.
// Both sides are zero-copy and the send buffer is reused, as the transport does; only ZeroMQ's
// own receive buffers are fresh per message (its API allocates them).
#pragma once
#include <chrono>
#include <cstdint>

namespace psbed::ps {

struct RawBenchOptions {
  std::uint64_t bytes = 4ull << 20;          // per message, each way
  double min_seconds = 1.0;                  // measure at least this long ...
  int min_round_trips = 10;                  // ... and at least this many round trips
  int warmup_round_trips = 3;                // untimed: connection set-up, first-touch page faults
  std::chrono::milliseconds timeout{10000};  // a round trip slower than this is an error
};

struct RawBenchResult {
  std::uint64_t bytes = 0;
  std::uint64_t round_trips = 0;
  double seconds = 0;
  double gb_per_s = 0;       // (push + pull bytes) / seconds / 1e9
  double round_trip_ms = 0;  // mean
};

// Runs over tcp://127.0.0.1 on an ephemeral port, both ends in this process (each with its own
// ZeroMQ context and I/O thread, as two processes would have). Throws psbed::Error on a timeout
// or an echo that doesn't match what was sent.
RawBenchResult bench_raw_round_trip(const RawBenchOptions& options);

}  // namespace psbed::ps
