// The simulator's view of sufficient-factor broadcasting (core/comm.hpp): which layers skip the
// shards, the bytes each worker sends every peer after such a layer's backward, and the rebuild
// compute every worker pays per step. Built from choose_comm, so a prediction routes each layer
// as the live worker does.
#pragma once
#include <cstdint>
#include <vector>

#include "core/comm.hpp"
#include "core/model_spec.hpp"

namespace psbed::predictor::sim {

struct FactorLayer {
  int layer = 0;              // index into ModelSpec::layers
  double bytes_per_peer = 0;  // K (M + N) x 4: one worker's factors, sent to each peer
  double rebuild_flops = 0;   // P workers' K x M by K x N products, 2 K M N flops each
};

struct FactorModel {
  int workers = 1;
  std::vector<FactorLayer> layers;  // the SFB layers only, in model order
  std::vector<bool> sfb;            // per model layer: no push or pull through the shards
  bool any() const { return !layers.empty(); }
  // Bytes a worker's link carries each way per step for the factors: every peer, every layer.
  double link_bytes() const;
  double rebuild_flops() const;
};

FactorModel factor_model(const ModelSpec& spec, CommMode mode, int workers, int shards, int batch,
                         const CommCost& cost);

// The bsp step when the factors are the only traffic and nothing overlaps: the compute, the
// rebuild at `flops_per_s`, and every factor byte through a link of `link_bytes_per_s`. The
// floor the event simulation must not go below; exact for one layer and no shard traffic.
double factor_step_floor(const FactorModel& m, double compute_s, double link_bytes_per_s,
                         double flops_per_s);

}  // namespace psbed::predictor::sim
