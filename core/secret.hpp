// Comparing secrets (tokens) without an early exit, so the time taken does not tell how much of
// a guess was right.
#pragma once
#include <string>

namespace psbed {

inline bool same_secret(const std::string& a, const std::string& b) {
  unsigned diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < a.size(); ++i)
    diff |= unsigned(a[i]) ^ unsigned(i < b.size() ? b[i] : 0);
  return diff == 0;
}

}  // namespace psbed
