// An IDX file (workloads/idx), plain or gzip, as the data loader reads it from disk.
#include "core/error.hpp"
#include "tests/fuzz/fuzz_check.hpp"
#include "workloads/dataset.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto bytes = psbed::workloads::maybe_gunzip({data, data + size}, "fuzz.idx");
    const auto a = psbed::workloads::parse_idx_u8(bytes, "fuzz.idx");
    std::uint64_t total = 1;
    for (std::uint32_t d : a.dims) total *= d;
    FUZZ_EXPECT(total == a.data.size());
  } catch (const psbed::Error& e) {
    psbed::fuzz::expect_message(e.what(), "parse_idx_u8");
  }
  return 0;
}
