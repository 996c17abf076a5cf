#include "ps/bad_message_counter.hpp"

namespace psbed::ps {

bool BadMessageCounter::record(const std::string& peer, Problem problem) {
  std::lock_guard<std::mutex> lock(mu_);
  ++total_;
  ++by_kind_[static_cast<std::size_t>(problem)];
  auto it = by_peer_.find(peer);
  if (it != by_peer_.end()) {
    ++it->second;
    return false;
  }
  if (by_peer_.size() >= kMaxPeers) return false;
  by_peer_.emplace(peer, 1);
  return true;
}

std::uint64_t BadMessageCounter::total() const {
  std::lock_guard<std::mutex> lock(mu_);
  return total_;
}

std::uint64_t BadMessageCounter::count(Problem problem) const {
  std::lock_guard<std::mutex> lock(mu_);
  return by_kind_[static_cast<std::size_t>(problem)];
}

std::uint64_t BadMessageCounter::count_from(const std::string& peer) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_peer_.find(peer);
  return it == by_peer_.end() ? 0 : it->second;
}

std::size_t BadMessageCounter::peers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return by_peer_.size();
}

}  // namespace psbed::ps
