// A part's whole state as one message's bytes: what a shard's primary sends a shard that rejoins
// (--replicas 2), so its copy starts where the primary is, and the primary's forwards then apply
// to it in order. Parameters, momentum, the clocks the consistency model keeps (bsp: the clocks
// applied and the sums of clocks still gathering pushes; async and ssp: each worker's completed
// clock and the bytes of clocks under way) and the last push sequence applied per worker.
//
// Layout, host byte order (both ends run the same build): u64 numel, u64 applied clocks, u64
// workers, u64 pending clocks, u64 partial clocks, u64 sequences; numel floats of parameters,
// numel floats of momentum, workers u64 completed clocks; per pending clock u64 clock, workers
// u64 bytes, numel doubles of the sum; per partial clock u64 clock, workers u64 bytes; per
// sequence u64 worker, u64 sequence.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "core/status.hpp"
#include "ps/payload.hpp"
#include "ps/store.hpp"

namespace psbed::ps {

// Called by the part's lane, the only one that changes it.
Payload encode_part(const PartState& s, const std::map<int, std::uint64_t>& last_seq);
// Replaces the part's state with `bytes`; `last_seq` gets the sequences. Refused, saying why,
// when the bytes are not a state of this part.
Status install_part(Store& store, int key, int part, const Payload& bytes,
                    std::map<int, std::uint64_t>& last_seq);

}  // namespace psbed::ps
