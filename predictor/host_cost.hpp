// What moving bytes costs this host's CPU, measured on the spot: a profile splits the CPU its
// run used into a cost per message and a cost per byte, and one run cannot tell the two apart
// (its messages come in a fixed mix), so the per-byte part is measured here and the rest is
// charged per message.
#pragma once

namespace psbed::predictor {

// CPU nanoseconds per byte to send bytes over loopback TCP (the sender's and the receiver's
// copies through the kernel) and copy them once more in memory (ZeroMQ hands the receiver its
// own buffer; the client copies a pulled part into the parameters). Takes about 0.1 s.
double measure_copy_cpu_ns_per_byte();

}  // namespace psbed::predictor
