// Errors that cross a folder boundary. A psbed::Error's message is one line that names the
// thing that was wrong and what was expected; main() prints it as is and exits non-zero.
#pragma once
#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace psbed {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// A device the user asked for cannot be used here (no GPU, no driver, a build without CUDA).
// Not a bad input but a property of the machine: the command line exits with status 2 for it.
class DeviceUnavailable : public Error {
 public:
  using Error::Error;
};

// A command line that cannot work as given, found by the command rather than by the parser
// (flags that exclude each other: predict --analytic --trace-out): a usage error, exit status 2,
// as the parser's own.
class UsageError : public Error {
 public:
  using Error::Error;
};

// f(), an Error it throws prefixed with the flag whose value it parses:
// for_flag("--credit", [&] { return parse_bytes(text); }) -> "--credit: bad size 'x': ...".
template <class F>
auto for_flag(const std::string& flag, F f) {
  try {
    return f();
  } catch (const Error& e) {
    throw Error(flag + ": " + e.what());
  }
}

// A list flag's values, each at most once: "--workers gives 2 twice" + note otherwise.
template <class T>
void require_distinct(const std::string& flag, std::vector<T> values,
                      const std::string& note = "") {
  std::sort(values.begin(), values.end());
  const auto twice = std::adjacent_find(values.begin(), values.end());
  if (twice == values.end()) return;
  std::ostringstream v;
  v << *twice;
  throw Error(flag + " gives " + (v.str().empty() ? "''" : v.str()) + " twice" + note);
}

}  // namespace psbed
