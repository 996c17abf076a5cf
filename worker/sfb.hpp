// Sufficient-factor broadcasting (Poseidon's SFB) between workers, for the fc layers that
// core/comm.hpp assigns to it. After a layer's backward a worker stages its factors of the step
// (the layer's K x M inputs and K x N output gradients) and hands the transmission scheduler one
// transfer per peer (policy::Direction::kFactors); the policy orders them with the shard
// traffic, and each goes over ZeroMQ on the same link emulation as the shard connections. A
// transfer completes when its bytes have left the link (the pacer hands it to ZeroMQ; unshaped,
// at once). Every worker rebuilds the sum of all workers'
// gradients from everyone's factors, in worker order, and applies the optimizer itself. So the
// replicas of an SFB layer stay identical without a server: the same inputs, the same order, the
// same code.
//
// What arrives is checked before it is kept: an unknown connection, a sender id that is not the
// connection's, a layer not exchanged as factors, a payload of the wrong size and a step outside
// the window the consistency model allows are refused and counted, never applied. A peer the
// coordinator declares dead ends a wait that needs its factors with an Error naming it.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/comm.hpp"
#include "core/policy.hpp"
#include "core/trace.hpp"
#include "ps/bad_message_counter.hpp"
#include "ps/cluster_map.hpp"
#include "ps/link.hpp"
#include "ps/zmq_transport.hpp"
#include "worker/arrivals.hpp"
#include "worker/net.hpp"

namespace psbed::worker {

// The routing identity a worker's peer connections carry: "sfb:" + its name.
std::string sfb_identity(const std::string& worker_name);

class FactorExchange {
 public:
  // Binds `endpoint` ("tcp://127.0.0.1:*") now: its address goes into the registration.
  explicit FactorExchange(const std::string& endpoint);
  ~FactorExchange();
  FactorExchange(const FactorExchange&) = delete;
  FactorExchange& operator=(const FactorExchange&) = delete;
  std::string address() const;

  // After the cluster map: the layers `plan` sends as factors, this worker's id, the link
  // shaping its shard connections use (shared: one NIC). Connects to every peer and starts
  // receiving (with no SFB layer it connects to nobody until a live --comm switch adds one).
  void start(const ps::ClusterMap& map, int self, const CommPlan& plan,
             std::shared_ptr<ps::LinkBuckets> link);
  void stop();
  // Why a wait must end ("" to go on waiting); told of arrivals and waits.
  void set_abort(std::function<std::string()> abort) { abort_ = std::move(abort); }
  void set_progress(Progress* progress) { progress_ = progress; }
  void set_trace(TraceRecorder* trace) { trace_ = trace; }

  bool exchanges(int layer) const { return layer < int(sfb_.size()) && sfb_[layer]; }
  // Reads this worker's factors of `layer` for `step` from the net (they are its own share of
  // the step) and keeps them for the peers: one transfer per peer to hand the scheduler, in the
  // order to send them (each worker starts with the peer after it, so no one is everyone's
  // first).
  std::vector<policy::Transfer> stage(int layer, std::int64_t step, Net& net);
  // Sends the staged factors of transfer `t` (t.part: the peer) for `step`. `left` runs once
  // their bytes have left this worker's link: on the link's pacing thread, or before this
  // returns when unshaped; it must not block. Not called if the exchange is stopping.
  void send_to(const policy::Transfer& t, std::int64_t step, std::function<void()> left);
  // `per_layer` (floats a step pushes, per layer) plus, for each SFB layer, the floats its
  // factor transfers carry: what a step waits to have sent.
  std::vector<std::int64_t> with_factor_sends(std::vector<std::int64_t> per_layer) const;
  // Rebuilds and applies `layer`'s steps in order until `steps` of them are applied, waiting
  // for factors still to come; then applies any later step already complete without waiting.
  void apply_until(int layer, std::int64_t steps, Net& net);
  // A live --comm switch (worker/comm_switch.hpp), once the cluster agreed on `step`: expect()
  // keeps, from now on, the factors of `step` and later of the layers `plan` adds (a peer may
  // send them before this worker reaches `step`). switch_plan(), at the start of `step` with
  // every earlier step's factors applied: the layers `plan` adds go as factors from `step` on,
  // with `momentum` (by tensor: the shards' at `step`); the layers it drops no longer do.
  void expect(const CommPlan& plan, std::int64_t step);
  void switch_plan(const CommPlan& plan, std::int64_t step,
                   std::map<int, std::vector<float>> momentum);
  // An SFB layer's momentum: `which` 0 of its weight, 1 of its bias.
  const std::vector<float>& momentum(int layer, int which) const;
  // The coordinator declared worker `id` dead: waits that need its factors end naming it.
  void peer_dead(int id);
  std::int64_t applied(int layer) const;
  const ps::BadMessageCounter& refused() const { return refused_; }
  std::uint64_t bytes_sent() const { return bytes_sent_.load(); }

  // Checks a received message against the map and the window; keeps it or counts it refused.
  // Public for the receiving thread's callback and for tests.
  void receive(ps::Message&& m);

 private:
  struct Step {
    std::vector<ps::Payload> from;  // per worker, until applied
    std::vector<bool> arrived;      // per worker
    int count = 0;                  // arrived
    int applied = 0;                // ssp: applied one by one
  };
  Step& step_locked(int layer, std::int64_t step);
  template <class Ready>
  void wait_locked(std::unique_lock<std::mutex>& lock, int layer, std::int64_t step, Ready ready);
  void apply_each(int layer, std::int64_t steps, Net& net);
  std::string check(const ps::Message& m, int* problem) const;
  bool complete_locked(int layer, std::int64_t step) const;
  // Rebuilds the gradient of workers [first, last) of `from` and applies it, times `scale`.
  void rebuild_and_apply(int layer, std::int64_t step, const std::vector<ps::Payload>& from,
                         Net& net, int first, int last, float scale);
  std::string missing_locked(int layer, std::int64_t step) const;
  void size_layer(int layer);
  bool has_peers() const;
  void connect_peers(CommMode mode);
  // A message to peer `to` left the link (called by its connection, any thread).
  void left(int to, const ps::Header& h);

  // Factors staged for the peers, and the sends not yet off the link, by (layer, step).
  struct Outgoing {
    ps::Payload factors;
    int to_send = 0, in_flight = 0;
    double issued_us = -1;                      // the first peer's send: the trace slice's start
    std::map<int, std::function<void()>> left;  // by peer
  };
  std::mutex out_mu_;
  std::map<std::pair<int, std::int64_t>, Outgoing> outgoing_;

  std::string endpoint_;
  ps::ZmqTransport* router_zmq_ = nullptr;
  std::unique_ptr<ps::Transport> router_;
  std::vector<ps::ZmqTransport*> peer_zmq_;
  std::vector<std::unique_ptr<ps::Transport>> peers_;  // per worker id; null for self
  ps::ClusterMap map_;
  std::shared_ptr<ps::LinkBuckets> link_;
  int self_ = 0, workers_ = 0;
  std::int64_t window_ = 2;  // steps ahead of the applied count a factor may be
  bool each_ = false;        // ssp: each worker's factors applied alone, as they arrive
  std::vector<bool> sfb_;
  std::vector<std::int64_t> from_;    // per layer: a switch's first step of factors; -1 none
  std::vector<std::int64_t> floats_;  // per layer: one worker's factor floats
  std::map<std::string, int> identities_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::map<std::int64_t, Step>> pending_;  // per layer, by step
  std::vector<std::int64_t> applied_;                  // per layer: steps applied
  std::vector<bool> dead_;
  bool started_ = false;

  // Momentum buffers of the SFB layers' weight and bias, and the rebuilt gradients.
  std::vector<std::vector<float>> velocity_w_, velocity_b_, grad_w_, grad_b_;
  std::function<std::string()> abort_;
  Progress* progress_ = nullptr;
  TraceRecorder* trace_ = nullptr;
  ps::BadMessageCounter refused_;
  std::atomic<std::uint64_t> bytes_sent_{0};
};

}  // namespace psbed::worker
