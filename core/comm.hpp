// How each layer's gradients travel: through the parameter server (push the gradient, pull the
// parameters), or as sufficient factors broadcast worker to worker (Poseidon's SFB): for a
// fully-connected layer of N x M weights at batch K, its K x M inputs and K x N output
// gradients, from which every worker rebuilds the same gradient and applies it itself.
//
// Poseidon's cost model decides per layer for `hybrid`: the bytes the busiest link carries each
// way in one step. PS: every worker pushes and pulls the layer (MN + N floats), and the shards
// holding it carry that times workers / shards. SFB: every worker sends K(M + N) floats to each
// of its P - 1 peers and receives as much. Where the link rate is known, each route's messages
// count too, at a node's CPU per message: on a fast link a small layer costs more in messages
// (push, acknowledgment, pull and reply per tensor, times workers / shards at a shard) than in
// bytes, and its factors go in 2(P - 1) messages. Bytes alone would keep a 256 x 10 classifier
// on the shards at 1 Gbit/s with 2 workers, where its factors train 3-4% faster. The live worker
// and the simulator both decide with choose_comm, so a prediction models the choice a run makes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/consistency.hpp"
#include "core/defaults.hpp"
#include "core/model_spec.hpp"

namespace psbed {

enum class CommMode { kPs, kSfb, kHybrid };
// "ps", "sfb", "hybrid"; throws Error naming the text and the choices.
CommMode parse_comm(const std::string& text);
const char* to_string(CommMode m);

// Why a mode cannot run under a consistency model ("" if it can): SFB layers need a step to
// gather every worker's factors for, which async has not.
std::string comm_problem(CommMode m, const Consistency& mode);

// What a route's step costs besides its bytes. With no link rate the bytes alone decide, as in
// Poseidon (an unshaped run: the rate is not known).
struct CommCost {
  double link_bytes_per_sec = 0;  // each direction; 0: not known
  double message_s = defaults::kCommMessageUs * 1e-6;
};

struct LayerComm {
  int layer = 0;  // index into ModelSpec::layers (fc layers only)
  bool sfb = false;
  double ps_bytes = 0;         // busiest link, each way, per step, through the server
  double sfb_bytes = 0;        // busiest link, each way, per step, as factors
  double ps_messages = 0;      // sent and received per step by the busiest node, through the server
  double sfb_messages = 0;     // the same as factors
  double ps_s = 0, sfb_s = 0;  // each route's bytes and messages in seconds (0: rate not known)
  std::int64_t m = 0, n = 0;   // inputs and outputs of the layer
};

struct CommPlan {
  CommMode mode = CommMode::kPs;
  std::vector<LayerComm> layers;  // every fc layer, in model order
  std::vector<bool> sfb;          // per model layer: its tensors travel as factors
  bool any_sfb() const;
  // "fc1 sfb (0.25 of ps), fc2 sfb (...), fc3 ps" for the start line and the summary.
  std::string describe(const ModelSpec& spec) const;
};

// The per-layer choice for `workers` workers, `shards` shards and batch `batch`. ps: no layer;
// sfb: every fc layer; hybrid: the fc layers whose factors cost less on the busiest link (in
// time where `cost` has the link rate, else in bytes).
CommPlan choose_comm(const ModelSpec& spec, CommMode mode, int workers, int shards, int batch,
                     const CommCost& cost);

// The floats of one worker's factors of fc layer `l` at batch `batch`: batch x (in + out).
std::int64_t factor_floats(const LayerSpec& l, int batch);

}  // namespace psbed
