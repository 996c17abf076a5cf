#include "ps/validate.hpp"

#include <cstdio>

namespace psbed::ps {
namespace {

Verdict bad(Problem p, std::string reason) { return Verdict{p, std::move(reason)}; }

std::string hex32(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08X", v);
  return buf;
}

std::string n(std::uint64_t v) { return std::to_string(v); }

Verdict check_frame_shape(const FrameSizes& f) {
  if (f.frames == 0)
    return bad(Problem::kHeaderSize,
               "empty message, expected a " + n(kHeaderBytes) + "-byte header frame");
  if (f.header != kHeaderBytes)
    return bad(Problem::kHeaderSize,
               "header frame is " + n(f.header) + " bytes, expected " + n(kHeaderBytes));
  return {};
}

Verdict check_sizes(const Header& h, const FrameSizes& f, const Limits& limits) {
  const std::string op = op_name(h.op);
  if (f.frames > 2)
    return bad(Problem::kFrames,
               n(f.frames) + " frames, expected a header and at most one payload");
  if (h.length > limits.max_message_bytes)
    return bad(Problem::kOversize, "length " + n(h.length) + " exceeds the maximum message size " +
                                       n(limits.max_message_bytes));
  const bool has_payload_frame = f.frames == 2;
  if (payload_kind(h.op) == PayloadKind::kNone) {
    if (has_payload_frame)
      return bad(Problem::kFrames, op + " carries no payload, but a " + n(f.payload) +
                                       "-byte payload frame came with it");
    // Pull and PushAck use length for the range asked for or acknowledged.
    if (!addresses_part(h.op) && h.length != 0)
      return bad(Problem::kPayloadSize, "length " + n(h.length) + " on " + op + ", expected 0");
    return {};
  }
  if (!has_payload_frame && h.length != 0)
    return bad(Problem::kPayloadSize,
               "payload frame is missing but the header says " + n(h.length) + " bytes");
  if (has_payload_frame && f.payload != h.length)
    return bad(Problem::kPayloadSize,
               "payload frame is " + n(f.payload) + " bytes but the header says " + n(h.length));
  return {};
}

Verdict check_range(const Header& h, const PartSizes& parts) {
  const std::uint32_t tensors = parts.tensor_count();
  if (h.key >= tensors)
    return bad(Problem::kKey,
               "unknown key " + n(h.key) + " (the cluster map has " + n(tensors) + " tensors)");
  const std::uint32_t count = parts.part_count(h.key);
  if (h.part >= count)
    return bad(Problem::kPart, "unknown part " + n(h.part) + " of key " + n(h.key) + " (it has " +
                                   n(count) + " parts)");
  const std::uint64_t size = parts.part_bytes(h.key, h.part);
  // Written to avoid overflow: offset + length may wrap in 64 bits for a hostile header.
  if (h.offset > size || h.length > size - h.offset)
    return bad(Problem::kRange, "offset " + n(h.offset) + " + length " + n(h.length) +
                                    " is past the end of part " + n(h.part) + " of key " +
                                    n(h.key) + " (" + n(size) + " bytes)");
  return {};
}

}  // namespace

const char* problem_name(Problem p) {
  switch (p) {
    case Problem::kNone:
      return "ok";
    case Problem::kHeaderSize:
      return "bad header size";
    case Problem::kMagic:
      return "bad magic";
    case Problem::kVersion:
      return "bad version";
    case Problem::kOp:
      return "unknown op";
    case Problem::kFrames:
      return "bad frame count";
    case Problem::kOversize:
      return "oversize message";
    case Problem::kPayloadSize:
      return "payload size mismatch";
    case Problem::kKey:
      return "unknown key";
    case Problem::kPart:
      return "unknown part";
    case Problem::kRange:
      return "range past the part";
    case Problem::kSender:
      return "forged sender";
    case Problem::kNonfinite:
      return "non-finite gradient";
  }
  return "unknown problem";
}

Verdict validate(const Header& h, const FrameSizes& frames, const Limits& limits,
                 const PartSizes* parts) {
  if (Verdict v = check_frame_shape(frames); !v.ok()) return v;
  if (h.magic != kMagic)
    return bad(Problem::kMagic, "bad magic " + hex32(h.magic) + ", expected " + hex32(kMagic));
  if (h.version != kProtocolVersion)
    return bad(Problem::kVersion, "version " + n(h.version) + ", expected " + n(kProtocolVersion));
  const auto op = static_cast<std::uint8_t>(h.op);
  if (!is_known_op(op)) return bad(Problem::kOp, "unknown op " + n(op));
  if (Verdict v = check_sizes(h, frames, limits); !v.ok()) return v;
  if (parts != nullptr && addresses_part(h.op)) return check_range(h, *parts);
  return {};
}

Verdict check_message(const std::uint8_t* header_frame, const FrameSizes& frames,
                      const Limits& limits, const PartSizes* parts, Header* out) {
  if (Verdict v = check_frame_shape(frames); !v.ok()) return v;
  *out = decode_header(header_frame);
  return validate(*out, frames, limits, parts);
}

}  // namespace psbed::ps
