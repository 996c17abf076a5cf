// Counts dropped messages by kind and by peer, so a server can log the first bad message from
// each peer and only count the rest: one misbehaving client must not flood the log, and every
// peer that misbehaves must still show up in it once.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "ps/validate.hpp"

namespace psbed::ps {

// Thread-safe: the receiving thread records, anyone (a stats endpoint, a test) reads.
class BadMessageCounter {
 public:
  // Peers remembered individually; bad messages from further peers are still counted by kind
  // and in total but never reported as "first", so a flood of fresh identities can't grow the
  // map (or the log) without bound.
  static constexpr std::size_t kMaxPeers = 4096;

  // Records one bad message from `peer` (a transport's peer id: any bytes). Returns true exactly
  // when it is the first one recorded from that peer: the caller logs then, and only then.
  bool record(const std::string& peer, Problem problem);

  std::uint64_t total() const;
  std::uint64_t count(Problem problem) const;
  std::uint64_t count_from(const std::string& peer) const;
  std::size_t peers() const;  // distinct peers remembered

 private:
  mutable std::mutex mu_;
  std::uint64_t total_ = 0;
  std::array<std::uint64_t, kProblemKinds> by_kind_{};
  std::unordered_map<std::string, std::uint64_t> by_peer_;
};

}  // namespace psbed::ps
