// The two places a Payload meets a ZeroMQ frame, both without copying the bytes. Shared by the
// transport and the raw benchmark so the benchmark measures the same send and receive paths.
// And the connection check of the one-shot clients (ctl, probe).
#pragma once
#include <chrono>
#include <string>
#include <zmq.hpp>

#include "ps/payload.hpp"

namespace psbed::ps {

// A frame that points at the payload's bytes. ZeroMQ holds a reference to the payload's owner
// and drops it, on its I/O thread, once the bytes are written to the socket: the tensor's buffer
// lives exactly as long as the send needs it. An empty payload gives an empty frame.
zmq::message_t zero_copy_frame(const Payload& payload);

// A payload that owns a received frame: the store reads the bytes ZeroMQ received into.
Payload adopt_frame(zmq::message_t&& frame);

// Connects `s` with ZMQ_IMMEDIATE (writable only once a connection is up: ZeroMQ would otherwise
// queue messages for an address nothing listens on) and waits up to `wait` for the connection.
// False if none came. An endpoint ZeroMQ cannot take throws psbed::Error: "WHO: cannot connect
// to 'ENDPOINT': REASON (expected an endpoint such as EXAMPLE)".
bool connect_and_wait(zmq::socket_t& s, const std::string& endpoint, std::chrono::milliseconds wait,
                      const std::string& who, const std::string& example);

}  // namespace psbed::ps
