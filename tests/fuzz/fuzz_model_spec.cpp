// A model spec (core/model_spec): TOML a user writes or a cluster map carries, checked layer by
// layer into shapes and tensors.
#include "core/error.hpp"
#include "core/model_spec.hpp"
#include "tests/fuzz/fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const psbed::ModelSpec m = psbed::parse_model_spec(psbed::fuzz::text_of(data, size), "fuzz");
    FUZZ_EXPECT(m.parameter_count() >= 0);
    for (const auto& t : m.tensors) FUZZ_EXPECT(t.numel > 0);
  } catch (const psbed::Error& e) {
    psbed::fuzz::expect_message(e.what(), "parse_model_spec");
  }
  return 0;
}
