#include <catch2/catch.hpp>

#include "ps/bad_message_counter.hpp"
#include "ps/protocol.hpp"
#include "ps/validate.hpp"

using namespace psbed::ps;
using Catch::Contains;

namespace {

// Two tensors: key 0 has one 256-byte part, key 1 has parts of 128 and 64 bytes.
const PartTable kParts({{256}, {128, 64}});

Header push(std::uint32_t key, std::uint32_t part, std::uint64_t offset, std::uint64_t length) {
  Header h;
  h.op = Op::kPush;
  h.key = key;
  h.part = part;
  h.offset = offset;
  h.length = length;
  return h;
}

// A well-formed push of `length` bytes carries one payload frame of that size.
FrameSizes frames_for(const Header& h) { return FrameSizes{2, kHeaderBytes, h.length}; }

Verdict check(const Header& h, const FrameSizes& f, const Limits& limits = Limits{}) {
  return validate(h, f, limits, &kParts);
}

}  // namespace

TEST_CASE("a header survives encode and decode field for field", "[ps][protocol]") {
  Header h;
  h.op = Op::kPullReply;
  h.flags = 0xA5;
  h.sender = 0xDEADBEEF;
  h.key = 7;
  h.part = 0x01020304;
  h.priority = -42;
  h.offset = 0x1122334455667788ull;
  h.length = 1ull << 40;
  h.clock = 123456789;
  h.sequence = ~0ull;
  const HeaderBytes bytes = encode_header(h);
  const Header d = decode_header(bytes.data());
  CHECK(d.magic == kMagic);
  CHECK(d.version == kProtocolVersion);
  CHECK(d.op == h.op);
  CHECK(d.flags == h.flags);
  CHECK(d.sender == h.sender);
  CHECK(d.key == h.key);
  CHECK(d.part == h.part);
  CHECK(d.priority == h.priority);
  CHECK(d.offset == h.offset);
  CHECK(d.length == h.length);
  CHECK(d.clock == h.clock);
  CHECK(d.sequence == h.sequence);
}

TEST_CASE("the header is little-endian at the documented offsets", "[ps][protocol]") {
  Header h;
  h.op = Op::kPush;
  h.key = 0x0A0B0C0D;
  h.priority = -2;
  const HeaderBytes b = encode_header(h);
  // magic 0x50534244 reads "DBSP" in memory, low byte first.
  CHECK(b[0] == 0x44);
  CHECK(b[3] == 0x50);
  CHECK(b[4] == kProtocolVersion);
  CHECK(b[6] == static_cast<std::uint8_t>(Op::kPush));
  CHECK(b[12] == 0x0D);
  CHECK(b[15] == 0x0A);
  CHECK(b[20] == 0xFE);  // -2 in two's complement
  CHECK(b[23] == 0xFF);
  for (std::size_t i = 56; i < kHeaderBytes; ++i) CHECK(b[i] == 0);  // reserved
}

TEST_CASE("well-formed messages of every op pass", "[ps][protocol]") {
  CHECK(check(push(1, 0, 64, 64), frames_for(push(1, 0, 64, 64))).ok());
  Header pull = push(1, 1, 0, 64);
  pull.op = Op::kPull;  // no payload: length is what is asked for
  CHECK(check(pull, FrameSizes{1, kHeaderBytes, 0}).ok());
  Header control;
  control.op = Op::kControl;
  control.length = 17;
  CHECK(check(control, FrameSizes{2, kHeaderBytes, 17}).ok());
  for (std::uint8_t op = 1; op <= kLastOp; ++op) {
    Header h;
    h.op = static_cast<Op>(op);
    INFO(op_name(h.op));
    CHECK(check(h, FrameSizes{1, kHeaderBytes, 0}).ok());
    CHECK(std::string(op_name(h.op)) != "unknown");
  }
}

TEST_CASE("every malformed field is named with what was expected", "[ps][protocol]") {
  Header h = push(1, 0, 0, 16);
  Verdict v;

  SECTION("magic") {
    h.magic = 0x12345678;
    v = check(h, frames_for(h));
    CHECK(v.problem == Problem::kMagic);
    CHECK(v.reason == "bad magic 0x12345678, expected 0x50534244");
  }
  SECTION("version") {
    h.version = 3;
    v = check(h, frames_for(h));
    CHECK(v.problem == Problem::kVersion);
    CHECK(v.reason == "version 3, expected 1");
  }
  SECTION("op") {
    h.op = static_cast<Op>(77);
    v = check(h, frames_for(h));
    CHECK(v.problem == Problem::kOp);
    CHECK(v.reason == "unknown op 77");
    h.op = static_cast<Op>(0);
    CHECK(check(h, frames_for(h)).reason == "unknown op 0");
  }
  SECTION("key") {
    h.key = 9;
    v = check(h, frames_for(h));
    CHECK(v.problem == Problem::kKey);
    CHECK(v.reason == "unknown key 9 (the cluster map has 2 tensors)");
  }
  SECTION("part") {
    h.part = 5;
    v = check(h, frames_for(h));
    CHECK(v.problem == Problem::kPart);
    CHECK(v.reason == "unknown part 5 of key 1 (it has 2 parts)");
  }
  SECTION("offset + length past the part") {
    h = push(1, 0, 100, 64);
    v = check(h, frames_for(h));
    CHECK(v.problem == Problem::kRange);
    CHECK(v.reason == "offset 100 + length 64 is past the end of part 0 of key 1 (128 bytes)");
    // An offset chosen to wrap offset + length in 64 bits is still caught.
    h = push(1, 0, ~0ull - 8, 16);
    CHECK(check(h, frames_for(h)).problem == Problem::kRange);
  }
  SECTION("a Pull's range is checked too") {
    h = push(1, 1, 32, 64);
    h.op = Op::kPull;
    v = check(h, FrameSizes{1, kHeaderBytes, 0});
    CHECK(v.reason == "offset 32 + length 64 is past the end of part 1 of key 1 (64 bytes)");
  }
  SECTION("payload size mismatch") {
    v = check(h, FrameSizes{2, kHeaderBytes, 12});
    CHECK(v.problem == Problem::kPayloadSize);
    CHECK(v.reason == "payload frame is 12 bytes but the header says 16");
    v = check(h, FrameSizes{1, kHeaderBytes, 0});
    CHECK(v.problem == Problem::kPayloadSize);
    CHECK(v.reason == "payload frame is missing but the header says 16 bytes");
  }
  SECTION("oversize length") {
    h.length = 2147483648ull;
    v = check(h, frames_for(h));
    CHECK(v.problem == Problem::kOversize);
    CHECK(v.reason == "length 2147483648 exceeds the maximum message size 268435456");
    v = check(push(0, 0, 0, 200), frames_for(push(0, 0, 0, 200)), Limits{128});
    CHECK(v.reason == "length 200 exceeds the maximum message size 128");
  }
  SECTION("short header frame") {
    v = check(h, FrameSizes{2, 40, 16});
    CHECK(v.problem == Problem::kHeaderSize);
    CHECK(v.reason == "header frame is 40 bytes, expected 64");
    v = check(h, FrameSizes{0, 0, 0});
    CHECK(v.problem == Problem::kHeaderSize);
    CHECK_THAT(v.reason, Contains("empty message"));
  }
  SECTION("extra frames") {
    v = check(h, FrameSizes{3, kHeaderBytes, 16});
    CHECK(v.problem == Problem::kFrames);
    CHECK(v.reason == "3 frames, expected a header and at most one payload");
  }
  SECTION("a payload on an op that has none") {
    h.op = Op::kHeartbeat;
    h.length = 0;
    v = check(h, FrameSizes{2, kHeaderBytes, 12});
    CHECK(v.problem == Problem::kFrames);
    CHECK(v.reason == "Heartbeat carries no payload, but a 12-byte payload frame came with it");
    h.length = 16;
    v = check(h, FrameSizes{1, kHeaderBytes, 0});
    CHECK(v.problem == Problem::kPayloadSize);
    CHECK(v.reason == "length 16 on Heartbeat, expected 0");
  }
}

TEST_CASE("without a cluster map only the framing is checked", "[ps][protocol]") {
  const Header h = push(99, 7, 1000, 16);
  CHECK(validate(h, frames_for(h), Limits{}, nullptr).ok());
  CHECK_FALSE(validate(h, frames_for(h), Limits{}, &kParts).ok());
}

TEST_CASE("check_message decodes only a full-size header frame", "[ps][protocol]") {
  Header h = push(1, 0, 0, 16);
  HeaderBytes bytes = encode_header(h);
  Header out;
  CHECK(check_message(bytes.data(), frames_for(h), Limits{}, &kParts, &out).ok());
  CHECK(out.length == 16);
  CHECK(out.op == Op::kPush);
  bytes[0] ^= 0xFF;  // corrupt the magic
  CHECK(check_message(bytes.data(), frames_for(h), Limits{}, &kParts, &out).problem ==
        Problem::kMagic);
  const std::uint8_t short_frame[40] = {};
  CHECK(check_message(short_frame, FrameSizes{1, sizeof short_frame, 0}, Limits{}, &kParts, &out)
            .reason == "header frame is 40 bytes, expected 64");
}

TEST_CASE("bad messages are counted per kind and per peer, reported first once per peer",
          "[ps][protocol]") {
  BadMessageCounter c;
  CHECK(c.record("worker-1", Problem::kMagic));        // first from worker-1: log it
  CHECK_FALSE(c.record("worker-1", Problem::kMagic));  // then only count
  CHECK_FALSE(c.record("worker-1", Problem::kRange));
  CHECK(c.record("worker-2", Problem::kRange));  // a different peer is logged once too
  CHECK_FALSE(c.record("worker-2", Problem::kMagic));
  CHECK(c.total() == 5);
  CHECK(c.count(Problem::kMagic) == 3);
  CHECK(c.count(Problem::kRange) == 2);
  CHECK(c.count(Problem::kOp) == 0);
  CHECK(c.count_from("worker-1") == 3);
  CHECK(c.count_from("worker-2") == 2);
  CHECK(c.count_from("worker-3") == 0);
  CHECK(c.peers() == 2);
}

TEST_CASE("the counter stops remembering new peers at its cap but keeps counting",
          "[ps][protocol]") {
  BadMessageCounter c;
  std::size_t firsts = 0;
  for (std::size_t i = 0; i < BadMessageCounter::kMaxPeers; ++i)
    firsts += c.record("peer-" + std::to_string(i), Problem::kOp) ? 1 : 0;
  CHECK(firsts == BadMessageCounter::kMaxPeers);
  CHECK_FALSE(c.record("one-too-many", Problem::kOp));
  CHECK(c.peers() == BadMessageCounter::kMaxPeers);
  CHECK(c.total() == BadMessageCounter::kMaxPeers + 1);
  CHECK(c.count(Problem::kOp) == c.total());
}
