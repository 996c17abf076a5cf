// The wire format between workers, server shards and the coordinator.
//
// A message is a fixed 64-byte header frame followed by zero or one payload frame. The header is
// encoded field by field, little-endian, so it reads the same on every host and compiler (no
// struct punning: padding and byte order would leak into the wire). Layout, by byte offset:
//
//    0 magic    u32  0x50534244 ('PSBD')     24 offset    u64  byte offset within the part
//    4 version  u16  kProtocolVersion        32 length    u64  payload bytes (Pull: bytes wanted)
//    6 op       u8   see Op                  40 clock     u64  the sender's training step
//    7 flags    u8   op-specific (see Op)    48 sequence  u64  per-sender counter, matches replies
//    8 sender   u32  node id                 56 reserved  8 bytes, sent as zero, ignored
//   12 key      u32  tensor index
//   16 part     u32  part index within the tensor
//   20 priority i32  lower = sooner (layers near the input first)
//
// The header is fixed-size so a receiver can check it before trusting any length in it, and so a
// part's bytes travel in their own frame, never copied next to the header.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>

namespace psbed::ps {

constexpr std::uint32_t kMagic = 0x50534244;  // 'PSBD'
constexpr std::uint16_t kProtocolVersion = 1;
constexpr std::size_t kHeaderBytes = 64;

// What a message asks for. The numbers are the wire values: never renumber, only append.
enum class Op : std::uint8_t {
  kRegister = 1,        // node -> coordinator: JSON {role, address, ...}
  kClusterMap = 2,      // coordinator -> node: JSON cluster map (the reply to Register)
  kPush = 3,            // worker -> shard: gradient bytes [offset, offset+length) of (key, part)
                        // (flags 1, push-pull: answered, once a pull of clock + 1 would be,
                        // by a PullReply of the same bytes of the updated part, and by a
                        // PushAck before it when that must wait for other workers; refused
                        // under --replicas 2)
  kPushAck = 4,         // shard -> worker: that push was applied; no payload
  kPull = 5,            // worker -> shard: send me `length` bytes of (key, part) at `offset`
                        // (flags 1: of its momentum, not its parameters)
  kPullReply = 6,       // shard -> worker: the parameter bytes asked for
  kBarrier = 7,         // node -> coordinator: JSON {"name"}: I reached barrier `name`
  kBarrierRelease = 8,  // coordinator -> node: JSON {"name", ...}: everyone reached it
  kHeartbeat = 9,       // node -> coordinator: still alive
  kShutdown = 10,       // coordinator -> node: finish and exit
  kControl = 11,        // either way: JSON control-plane message (config, stats, ...)
  kError = 12,          // either way: JSON {"error": "..."} about a previous message
  kFactors = 13,        // worker -> worker: a step's sufficient factors of an fc layer (key:
                        // the layer, clock: the step); K x M inputs then K x N output gradients
  kReplicate = 14,      // primary shard -> backup shard (--replicas 2), about (key, part).
                        // flags 0: one worker's push it took (priority: the worker, sequence:
                        // the push's), answered by a PushAck echoing the header; flags 1: it
                        // applied bsp clock `clock` (no bytes; priority: the workers averaged);
                        // flags 2: the part's whole state, to a shard that rejoined
                        // (ps/part_snapshot.hpp). Flags 1 and 2 are not answered
  kAssign = 15,         // worker -> shard: (key, part)'s parameters then momentum (2 x the
                        // part's floats), taken as the part's state from clock `clock` on (a
                        // live --comm switch hands an SFB layer back); answered by a PushAck
};

// The highest op this version understands; values above it (and 0) are rejected.
constexpr std::uint8_t kLastOp = static_cast<std::uint8_t>(Op::kAssign);

bool is_known_op(std::uint8_t op);
// "Push", "PullReply", ...; "unknown" for values is_known_op rejects.
const char* op_name(Op op);

// What the payload frame of an op holds.
enum class PayloadKind {
  kNone,  // no payload frame; `length` means something else or must be 0 (see addresses_part)
  kData,  // tensor bytes: exactly `length` of them
  kJson,  // a JSON document of `length` bytes
};
PayloadKind payload_kind(Op op);
// Whether key/part/offset/length name a byte range of a tensor part (Push, PushAck, Pull,
// PullReply): only those are range-checked against the cluster map.
bool addresses_part(Op op);

struct Header {
  std::uint32_t magic = kMagic;
  std::uint16_t version = kProtocolVersion;
  Op op = Op::kHeartbeat;  // may hold an unknown value after decode: validate before switching
  std::uint8_t flags = 0;
  std::uint32_t sender = 0;
  std::uint32_t key = 0;
  std::uint32_t part = 0;
  std::int32_t priority = 0;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  std::uint64_t clock = 0;
  std::uint64_t sequence = 0;
};

using HeaderBytes = std::array<std::uint8_t, kHeaderBytes>;

// Writes exactly kHeaderBytes bytes to `out`.
void encode_header(const Header& h, std::uint8_t* out);
HeaderBytes encode_header(const Header& h);
// Reads exactly kHeaderBytes bytes from `in`. Decoding never fails: check the frame size first
// and validate the result (validate.hpp) before acting on it.
Header decode_header(const std::uint8_t* in);

}  // namespace psbed::ps
