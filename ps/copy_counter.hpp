// Payload bytes copied in memory on the data path (a pull's arrival into the parameters, a
// shard's copy-on-write of a part a reply still holds, a misaligned push's realignment), counted
// for the whole process: `psbed bench ps` divides them by the payload bytes moved, the copies
// per payload byte that a zero-copy path keeps near its floor.
#pragma once
#include <atomic>
#include <cstdint>

namespace psbed::ps {

inline std::atomic<std::uint64_t>& payload_bytes_copied() {
  static std::atomic<std::uint64_t> bytes{0};
  return bytes;
}

inline void count_copy(std::uint64_t bytes) {
  payload_bytes_copied().fetch_add(bytes, std::memory_order_relaxed);
}

}  // namespace psbed::ps
