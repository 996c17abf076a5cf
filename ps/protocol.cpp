#include "ps/protocol.hpp"

#include <limits>

namespace psbed::ps {
namespace {

// Little-endian by shifts: correct on any host byte order and free of alignment traps.
template <typename T>
void put(std::uint8_t* out, std::size_t at, T value) {
  for (std::size_t i = 0; i < sizeof(T); ++i)
    out[at + i] = static_cast<std::uint8_t>(static_cast<std::uint64_t>(value) >> (8 * i));
}

template <typename T>
T get(const std::uint8_t* in, std::size_t at) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i)
    v |= static_cast<std::uint64_t>(in[at + i]) << (8 * i);
  return static_cast<T>(v);
}

// Two's complement by arithmetic, because unsigned -> signed conversion of out-of-range values is
// implementation-defined before C++20.
std::int32_t to_signed(std::uint32_t u) {
  if (u <= static_cast<std::uint32_t>(std::numeric_limits<std::int32_t>::max()))
    return static_cast<std::int32_t>(u);
  return -static_cast<std::int32_t>(~u) - 1;
}

}  // namespace

bool is_known_op(std::uint8_t op) { return op >= 1 && op <= kLastOp; }

const char* op_name(Op op) {
  switch (op) {
    case Op::kRegister:
      return "Register";
    case Op::kClusterMap:
      return "ClusterMap";
    case Op::kPush:
      return "Push";
    case Op::kPushAck:
      return "PushAck";
    case Op::kPull:
      return "Pull";
    case Op::kPullReply:
      return "PullReply";
    case Op::kBarrier:
      return "Barrier";
    case Op::kBarrierRelease:
      return "BarrierRelease";
    case Op::kHeartbeat:
      return "Heartbeat";
    case Op::kShutdown:
      return "Shutdown";
    case Op::kControl:
      return "Control";
    case Op::kError:
      return "Error";
    case Op::kFactors:
      return "Factors";
    case Op::kReplicate:
      return "Replicate";
    case Op::kAssign:
      return "Assign";
  }
  return "unknown";
}

PayloadKind payload_kind(Op op) {
  switch (op) {
    case Op::kPush:
    case Op::kPullReply:
    case Op::kFactors:
    case Op::kReplicate:
    case Op::kAssign:
      return PayloadKind::kData;
    case Op::kRegister:
    case Op::kClusterMap:
    case Op::kControl:
    case Op::kError:
    case Op::kBarrier:         // {"name": ...}
    case Op::kBarrierRelease:  // {"name": ..., "evaluator": ...}
      return PayloadKind::kJson;
    default:
      return PayloadKind::kNone;
  }
}

bool addresses_part(Op op) {
  return op == Op::kPush || op == Op::kPushAck || op == Op::kPull || op == Op::kPullReply ||
         op == Op::kReplicate;
}

void encode_header(const Header& h, std::uint8_t* out) {
  put<std::uint32_t>(out, 0, h.magic);
  put<std::uint16_t>(out, 4, h.version);
  put<std::uint8_t>(out, 6, static_cast<std::uint8_t>(h.op));
  put<std::uint8_t>(out, 7, h.flags);
  put<std::uint32_t>(out, 8, h.sender);
  put<std::uint32_t>(out, 12, h.key);
  put<std::uint32_t>(out, 16, h.part);
  put<std::uint32_t>(out, 20, static_cast<std::uint32_t>(h.priority));
  put<std::uint64_t>(out, 24, h.offset);
  put<std::uint64_t>(out, 32, h.length);
  put<std::uint64_t>(out, 40, h.clock);
  put<std::uint64_t>(out, 48, h.sequence);
  put<std::uint64_t>(out, 56, 0);  // reserved
}

HeaderBytes encode_header(const Header& h) {
  HeaderBytes bytes{};
  encode_header(h, bytes.data());
  return bytes;
}

Header decode_header(const std::uint8_t* in) {
  Header h;
  h.magic = get<std::uint32_t>(in, 0);
  h.version = get<std::uint16_t>(in, 4);
  h.op = static_cast<Op>(get<std::uint8_t>(in, 6));  // any u8 is a valid value of Op's type
  h.flags = get<std::uint8_t>(in, 7);
  h.sender = get<std::uint32_t>(in, 8);
  h.key = get<std::uint32_t>(in, 12);
  h.part = get<std::uint32_t>(in, 16);
  h.priority = to_signed(get<std::uint32_t>(in, 20));
  h.offset = get<std::uint64_t>(in, 24);
  h.length = get<std::uint64_t>(in, 32);
  h.clock = get<std::uint64_t>(in, 40);
  h.sequence = get<std::uint64_t>(in, 48);
  return h;
}

}  // namespace psbed::ps
