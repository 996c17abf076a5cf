// The two places a Payload meets a ZeroMQ frame, both without copying the bytes. Shared by the
// transport and the raw benchmark so the benchmark measures the same send and receive paths.
#pragma once
#include <zmq.hpp>

#include "ps/payload.hpp"

namespace psbed::ps {

// A frame that points at the payload's bytes. ZeroMQ holds a reference to the payload's owner
// and drops it, on its I/O thread, once the bytes are written to the socket: the tensor's buffer
// lives exactly as long as the send needs it. An empty payload gives an empty frame.
zmq::message_t zero_copy_frame(const Payload& payload);

// A payload that owns a received frame: the store reads the bytes ZeroMQ received into.
Payload adopt_frame(zmq::message_t&& frame);

}  // namespace psbed::ps
