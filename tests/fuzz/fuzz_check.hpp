// What every harness shares: the input as text, and a check that aborts (a finding) when a
// decoder breaks its own contract, not only when memory goes wrong.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace psbed::fuzz {

inline std::string text_of(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// An error a user reads says something. (Whether it stays on one line is not asked everywhere:
// a decoder may quote a name the input gives, newlines and all.)
inline void expect_message(const std::string& what, const char* decoder) {
  if (what.empty()) {
    std::fprintf(stderr, "%s: an empty error message\n", decoder);
    std::abort();
  }
}

// An error that goes out as it is (an HTTP answer): one line of printable ASCII.
inline void expect_one_line(const std::string& what, const char* decoder) {
  expect_message(what, decoder);
  for (unsigned char c : what)
    if (c < 0x20 || c >= 0x7f) {
      std::fprintf(stderr, "%s: an error message that is not one printable line: '%s'\n", decoder,
                   what.c_str());
      std::abort();
    }
}

#define FUZZ_EXPECT(cond)                                                      \
  do {                                                                         \
    if (!(cond)) {                                                             \
      std::fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                            \
    }                                                                          \
  } while (0)

}  // namespace psbed::fuzz
