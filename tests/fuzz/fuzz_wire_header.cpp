// The wire header and its validation (ps/protocol, ps/validate), as a transport or a shard meets
// a message. Input: one byte that shapes the message (frame count, a short header frame), then
// the header frame's bytes; whatever follows the 64 header bytes stands for the payload frame.
#include <cstring>
#include <vector>

#include "ps/validate.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using namespace psbed::ps;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::uint8_t shape = data[0];
  ++data, --size;
  FrameSizes frames;
  frames.frames = shape & 3;  // 0 to 3 frames
  frames.header = (shape & 4) && size > 0 ? size - 1 : std::min(size, kHeaderBytes);
  frames.payload = size > kHeaderBytes ? size - kHeaderBytes : 0;
  // The header frame as the transport holds it: exactly frames.header bytes.
  std::vector<std::uint8_t> header(data, data + frames.header);
  // A small cluster map: a key of two parts, an empty one, a large one.
  static const PartTable parts({{100, 50}, {0}, {1ull << 20}});
  Limits limits;
  limits.max_message_bytes = 1 << 16;
  for (const PartSizes* p :
       {static_cast<const PartSizes*>(nullptr), static_cast<const PartSizes*>(&parts)}) {
    Header h;
    const Verdict v = check_message(header.data(), frames, limits, p, &h);
    FUZZ_EXPECT(v.ok() == v.reason.empty());
    if (!v.ok()) {
      psbed::fuzz::expect_one_line(v.reason, "validate");
      FUZZ_EXPECT(std::strcmp(problem_name(v.problem), "unknown problem") != 0);
      continue;
    }
    // A header that passed reads back the same bytes (the reserved ones are sent as zero).
    FUZZ_EXPECT(frames.header == kHeaderBytes);
    HeaderBytes again = encode_header(h);
    FUZZ_EXPECT(std::memcmp(again.data(), header.data(), 56) == 0);
    FUZZ_EXPECT(is_known_op(static_cast<std::uint8_t>(h.op)));
    FUZZ_EXPECT(h.length <= limits.max_message_bytes);
    if (p != nullptr && addresses_part(h.op))
      FUZZ_EXPECT(h.offset + h.length <= parts.part_bytes(h.key, h.part));
  }
  return 0;
}
