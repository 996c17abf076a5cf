// A live --comm switch (`psbed ctl comm MODE`), the worker's side. Every worker must change its
// per-layer route at the same step (in bsp all of them gather the same layers' factors), so the
// coordinator asks first: at its next step boundary A each worker answers with A and goes on;
// at boundary A + 1, if the coordinator's word has not come, it waits for it there. The word is
// the step S the cluster agreed on (the largest answer plus two) or an abort. So every worker
// hears of S before it starts step S - 1: no peer's factors of S (which need everyone's step
// S - 1) reach a worker that does not expect them. A wait at A + 1 holds nobody up: a peer can
// reach A + 2, where it answers, with what this worker has done. From the word on, the factors
// of S of the layers the new plan adds are kept; at the start of S the new plan runs:
//   - a layer leaving the factors: its steps below S applied, the lowest-id worker hands its
//     parameters and momentum to the shards (op Assign); everyone's pulls of S wait for them;
//   - a layer joining them: every worker pulls its parameters and the shards' momentum at S
//     and applies the factors itself from S on.
// The parameters and momentum cross exactly: a switched run trains as an unswitched one.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/comm.hpp"
#include "core/trace.hpp"
#include "ps/client.hpp"
#include "ps/cluster_map.hpp"
#include "ps/node_link.hpp"
#include "worker/arrivals.hpp"
#include "worker/net.hpp"
#include "worker/sfb.hpp"

namespace psbed::worker {

// The per-layer route for the summary and the trace: {"mode", "layers": [{layer, route, ...}]}.
nlohmann::json comm_json(const CommPlan& plan, const ModelSpec& spec);
// Why this worker cannot send `plan`'s factors ("" if it can): no CURVE on the factor links
// (`keys`), or a device whose factors cannot be read.
std::string comm_refusal(const CommPlan& plan, bool keys, const std::string& device,
                         const std::string& compute);

class CommSwitch {
 public:
  // After joining: what a switch needs besides the step's objects. `abort` says why a wait must
  // end ("" to go on).
  void set_up(const ps::ClusterMap& map, int id, const std::string& name, TraceRecorder& trace,
              Progress& progress, std::function<std::string()> abort,
              std::function<std::string(const CommPlan&)> refusal);
  // From the control thread: comm_prepare, comm_commit and comm_abort; other events are ignored.
  void on_control(const nlohmann::json& j);
  // At the start of `step`, nothing in flight: answers a prepare and waits for the word, or, at
  // the agreed step, switches `comm` to the new plan. True when the plan changed.
  bool at_boundary(ps::NodeLink& link, ps::PsClient& client, FactorExchange& sfb, Net& net,
                   std::int64_t step, CommPlan& comm);
  // Each switch made: [{seq, mode, step}].
  const nlohmann::json& switches() const { return switches_; }

 private:
  // The coordinator has this long to send the word after an answer (its own bound is shorter).
  static constexpr double kWordTimeoutS = 20;
  void wait_word_locked(std::unique_lock<std::mutex>& lock);
  void take_word_locked(std::unique_lock<std::mutex>& lock, FactorExchange& sfb);
  void apply(ps::NodeLink& link, ps::PsClient& client, FactorExchange& sfb, Net& net,
             std::int64_t step, CommPlan& comm);
  CommPlan plan_of(const std::string& mode) const;

  ps::ClusterMap map_;
  int id_ = 0;
  std::string name_;
  TraceRecorder* trace_ = nullptr;
  Progress* progress_ = nullptr;
  std::function<std::string()> abort_;
  std::function<std::string(const CommPlan&)> refusal_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<nlohmann::json> prepare_, word_;  // the request, and its commit or abort
  std::optional<nlohmann::json> commit_;          // agreed, for a later step (training thread)
  std::int64_t answered_ = -1;                    // the step this worker answered with
  nlohmann::json switches_ = nlohmann::json::array();
};

}  // namespace psbed::worker
