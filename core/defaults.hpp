// Defaults that several folders repeat: the live cluster, the launcher, the simulator and the
// predictor's commands must agree on them, or a prediction and a measurement of "the default"
// are of two configurations. One copy here; every options struct takes its value from it.
#pragma once
#include <cstdint>

namespace psbed::defaults {

// The largest part a tensor is cut into. Parts of a few MiB keep ZeroMQ near its best (DESIGN.md,
// "Figures measured"). The text is what the flags show as their default (--help) and hand on
// to the nodes; tests/core checks that it reads as kPartitionBytes.
inline constexpr std::int64_t kPartitionBytes = std::int64_t(4) << 20;
inline constexpr const char* kPartitionBytesText = "4MiB";

// A node's send buffer on an emulated link: about what ZeroMQ's queues and the kernel's socket
// buffers hold. The simulator's bucket links model the same buffer.
inline constexpr std::int64_t kSendBufferBytes = std::int64_t(16) << 20;

// Policy settings (core/policy.hpp): p3 and prophet slices, bytescheduler partitions, in
// parameters, and the credit (prophet: the largest block) a policy runs with when none is given.
inline constexpr std::int64_t kSliceParams = 40000;
inline constexpr std::int64_t kPartitionParams = 1000000;
inline constexpr std::int64_t kCreditBytes = std::int64_t(4) << 20;  // p3, prophet
inline constexpr std::int64_t kByteSchedulerCreditBytes =
    std::int64_t(4000000) * 4;  // 4M parameters

// Liveness: seconds between heartbeats, and of silence before the coordinator declares a node
// dead (at least twice the interval: one lost heartbeat is no death).
inline constexpr double kHeartbeatS = 0.5;
inline constexpr double kHeartbeatTimeoutS = 3.0;

// A node's CPU per message it sends or receives, for --comm hybrid's per-layer cost where the
// link rate is known: the profiles of the 2-core hosts measured 38-108 us (message_cost_us), and
// the grid's choices hold from 32 to 65 us (docs/results/sfb-hybrid.md).
inline constexpr double kCommMessageUs = 50;

// Threads applying updates on each server shard.
inline constexpr int kApplyThreads = 2;

}  // namespace psbed::defaults
