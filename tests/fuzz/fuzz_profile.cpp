// A profile.json (core/profile): what `psbed predict` and a worker's simulated compute read.
#include "core/error.hpp"
#include "core/profile.hpp"
#include "tests/fuzz/fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const psbed::Profile p =
        psbed::Profile::parse(psbed::fuzz::text_of(data, size), "profile 'fuzz.json'");
    (void)p.mean_compute_ms();
    (void)p.to_json().dump();
    psbed::ComputeSampler sampler(p, 1);
    (void)sampler.step_overhead_s();
  } catch (const psbed::Error& e) {
    psbed::fuzz::expect_message(e.what(), "Profile::parse");
  }
  return 0;
}
