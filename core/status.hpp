// Whether an operation succeeded and, if not, why: one line for a person that names what was
// wrong, as a psbed::Error's message does. For outcomes a caller handles rather than throws (a
// refused push, a usage problem the caller words), in place of a string that is "" for success,
// which reads the same as an error with nothing to say. LevelDB's Status, in small.
#pragma once
#include <string>
#include <utility>

namespace psbed {

class Status {
 public:
  // Success; Status() is the same.
  static Status success() { return Status(); }
  // Failure, with the reason (expected to be non-empty).
  static Status error(std::string message) { return Status(std::move(message)); }

  Status() = default;
  bool ok() const { return ok_; }
  // The reason; empty on success.
  const std::string& message() const { return message_; }

 private:
  explicit Status(std::string message) : ok_(false), message_(std::move(message)) {}

  bool ok_ = true;
  std::string message_;
};

}  // namespace psbed
