// Checking a received message before acting on it. A server logs and drops a bad message and
// keeps serving, so the check returns a verdict (never throws) whose reason is one line naming
// the field and what was expected: "bad magic 0x12345678, expected 0x50534244".
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "ps/part_sizes.hpp"
#include "ps/protocol.hpp"

namespace psbed::ps {

struct Limits {
  // The largest payload (and the largest `length` a Pull may ask for). Bigger tensors are sent
  // as several parts; the default leaves room for any part size the scheduler would choose.
  std::uint64_t max_message_bytes = 256ull << 20;
};

// What arrived, frame by frame (a ROUTER's routing-id frame excluded).
struct FrameSizes {
  std::size_t frames = 2;             // header frame included; 1 or 2 when well-formed
  std::size_t header = kHeaderBytes;  // bytes in the first frame
  std::size_t payload = 0;            // bytes in the second frame (0 if there is none)
};

// The kinds of problem, for counting; the reason string carries the detail.
enum class Problem {
  kNone = 0,
  kHeaderSize,  // no header frame, or not kHeaderBytes long
  kMagic,
  kVersion,
  kOp,
  kFrames,       // more than one payload frame, or a payload frame on an op that has none
  kOversize,     // length beyond Limits::max_message_bytes
  kPayloadSize,  // payload frame size != length, or a non-zero length on an op without one
  kKey,          // key beyond the cluster map
  kPart,         // part beyond the tensor's parts
  kRange,        // offset + length past the end of the part
  kSender,       // a worker id other than the one bound to the connection it came on
  kNonfinite,    // a gradient holding NaN or infinity
};
constexpr int kProblemKinds = static_cast<int>(Problem::kNonfinite) + 1;
const char* problem_name(Problem p);  // "bad magic", "unknown key", ...

struct Verdict {
  Problem problem = Problem::kNone;
  std::string reason;  // empty when ok
  bool ok() const { return problem == Problem::kNone; }
};

// Checks a decoded header against the frames that came with it. `parts` may be null: then the
// key/part/range checks are skipped (the transport has no cluster map; the store checks those).
// Checks go outside-in (frame sizes, magic, version, op, sizes, key, part, range) so the reason
// names the first thing that is wrong, not a consequence of it.
Verdict validate(const Header& h, const FrameSizes& frames, const Limits& limits,
                 const PartSizes* parts);

// Frame sizes first, then decode, then validate(). `header_frame` must hold frames.header bytes
// (it is only read when that is kHeaderBytes and frames.frames >= 1). On success *out is the
// decoded header; on failure *out is unspecified.
Verdict check_message(const std::uint8_t* header_frame, const FrameSizes& frames,
                      const Limits& limits, const PartSizes* parts, Header* out);

}  // namespace psbed::ps
