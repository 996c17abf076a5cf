// The worker's view of the parameter server (after ps-lite's KVWorker): asynchronous push and
// pull of one part (or a slice of one) with a completion callback. The training loop and,
// between them, the transmission scheduler decide what to send when; the client only moves
// bytes and matches replies to requests.
//
// Callbacks run on a transport thread: they must be short and must not block.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "ps/cluster_map.hpp"
#include "ps/link.hpp"
#include "ps/zmq_transport.hpp"

namespace psbed::ps {

class PsClient {
 public:
  using Callback = std::function<void()>;

  // Connects map.exp.connections DEALERs per server shard (connection_identity of `link_id`;
  // the first is `link_id` itself, make_link_id(): the shards
  // take this worker's id only from connections with the identity the coordinator gave them).
  // `link` shapes this worker's traffic to and from all shards together (null: unshaped).
  // With `keys` on, each shard's link is CURVE with the shard's key from the map.
  PsClient(const ClusterMap& map, int worker_id, const std::string& link_id,
           std::shared_ptr<LinkBuckets> link = nullptr, const CurveKeys& keys = {});
  ~PsClient();
  PsClient(const PsClient&) = delete;
  PsClient& operator=(const PsClient&) = delete;

  // Pushes floats [offset, offset + count) of plan part `part_index` (offset within the part);
  // `data` points at the first of them and must stay unchanged until on_ack runs (zero copy).
  void push(int part_index, const float* data, std::int64_t offset, std::int64_t count,
            std::uint64_t clock, int priority, Callback on_ack);
  // Pulls floats [offset, offset + count) of the part into dst (the first of them), then calls
  // on_arrival. Under bsp/ssp the shard answers when the clock allows.
  void pull(int part_index, float* dst, std::int64_t offset, std::int64_t count,
            std::uint64_t clock, int priority, Callback on_arrival);

  // Both in one round trip (push-pull): pushes `data` as push() does, and the shard answers with
  // the same floats of the part once a pull of clock + 1 would be answered (bsp: the clock
  // applied), written into dst; then on_answered. on_pushed runs at the shard's ack (bsp, ssp:
  // it acknowledges every push-pull first), or just after on_answered where no ack goes
  // (async). `data` may change once on_pushed ran. Saves the pull request and a turnaround, and
  // in async the ack. Not under --replicas 2 (the shards refuse it there).
  void push_pull(int part_index, const float* data, float* dst, std::int64_t offset,
                 std::int64_t count, std::uint64_t clock, int priority, Callback on_pushed,
                 Callback on_answered);

  // A live --comm switch: the part's momentum at `clock` (ready as its parameters are) into
  // dst, numel floats; and `values`, the part's parameters then its momentum (2 x numel floats,
  // kept alive until on_ack), sent as the part's state from `clock` on (op Assign).
  void pull_momentum(int part_index, float* dst, std::uint64_t clock, int priority,
                     Callback on_arrival);
  void assign(int part_index, const float* values, std::uint64_t clock, int priority,
              Callback on_ack);

  // Pulls one float from every shard at clock 0 (ready under every mode) and waits for the
  // answers: a shard whose advertised address leads nowhere would otherwise leave the first
  // step waiting forever. Throws Error naming the shard, its address and the wait after
  // `timeout_s` (--connect-timeout), or at once with abort()'s reason when that is not "".
  void check_shards(double timeout_s, const std::function<std::string()>& abort);

  // --replicas 2: shard `dead` is gone and shard `to` serves its parts from its copy. Every
  // request to `dead` not answered yet (a push not acknowledged may not be on the copy) goes to
  // `to` again, in the order first sent, under its first sequence: the new owner tells a push it
  // already applied by it. Later requests for those parts go to `to`. Returns how many were
  // resent. From any thread but a callback's.
  // `address`: where `to` serves now when it died and rejoined ("": the map's address).
  std::size_t fail_over(int dead, int to, const std::string& address = "");

  // Stops every shard's transport. A push or pull waiting for room on a full queue (a shard
  // that is gone, or a slow link) returns at once, on whichever thread it waits, and later ones
  // send nothing: a worker that stops is never held up by a shard. Idempotent; callable from any
  // thread but a callback's.
  void stop();
  // The requests not answered yet, for a worker that says what it waits on: the oldest (op, part,
  // shard, age) and the count per shard. "" when none.
  std::string describe_outstanding();
  std::uint64_t bytes_pushed() const { return pushed_; }
  std::uint64_t bytes_pulled() const { return pulled_; }
  const ClusterMap& map() const { return map_; }
  // Why a shard refused one of this worker's requests (its Error answer: a gradient holding NaN,
  // say), "" while none did. The request is never answered: a wait on it must end with this.
  std::string refusal() const;
  // A routing identity for a worker named `name`: the name (for the logs) and 128 random bits.
  static std::string make_link_id(const std::string& name);

  // --connections C: how a request for floats [offset, offset + count) of a part of `numel`
  // floats is cut, as (connection, offset, count). A part of C x kMinStripeBytes or more is C
  // stripes of ceil(numel / C) floats, stripe k on connection k; a smaller one goes whole on
  // connection part_index % C. Every float always goes on the same connection, so a pull still
  // follows the push of the same floats (ZeroMQ keeps order per connection only).
  struct Piece {
    int connection;
    std::int64_t offset, count;
  };
  static std::vector<Piece> stripes(int part_index, std::int64_t numel, std::int64_t offset,
                                    std::int64_t count, int connections);

 private:
  struct Pending {
    float* dst = nullptr;  // pulls
    std::uint64_t bytes = 0;
    Callback done;
    int part = -1, shard = -1, connection = 0;
    double sent_us = 0;
    // To send it again after a fail-over.
    Op op = Op::kPull;
    const float* data = nullptr;  // pushes
    std::int64_t offset = 0;
    std::uint64_t clock = 0;
    int priority = 0;
    std::uint8_t flags = 0;
    Callback answered;   // push-pulls: at the answer (`done` runs at the ack, or just before)
    bool acked = false;  // push-pulls: `done` ran at the shard's ack
  };
  static constexpr std::uint8_t kPullMomentum = 1;  // Pull's flag (protocol.hpp)
  static constexpr std::uint8_t kPushPull = 1;      // Push's flag (protocol.hpp)
  // Sends the request as stripes() cuts it; `done` runs once every piece is answered.
  void send(Op op, int part_index, const float* data, float* dst, std::int64_t offset,
            std::int64_t count, std::uint64_t clock, int priority, Callback done,
            std::uint8_t flags = 0, Callback answered = nullptr);
  void send_piece(Op op, int part_index, const float* data, float* dst, std::int64_t offset,
                  std::int64_t count, std::uint64_t clock, int priority, Callback done,
                  std::uint8_t flags, int connection, Callback answered);
  Message request(const Pending& p, std::uint64_t seq) const;
  static Callback countdown(const std::shared_ptr<std::atomic<int>>& left,
                            const std::shared_ptr<Callback>& all);
  void receive(int shard, Message&& m);
  // Connection k to shard `id` (not started); its ZeroMQ transport goes to zmq_[conn(id, k)].
  std::unique_ptr<Transport> open_connection(int id, int k, const std::string& address = "");
  std::size_t conn(int shard, int k) const { return std::size_t(shard * connections_ + k); }

  const ClusterMap& map_;
  int worker_;
  std::string link_id_;
  std::shared_ptr<LinkBuckets> link_;
  CurveKeys keys_;
  int connections_ = 1;  // per shard (map.exp.connections)
  // Indexed by conn(shard, k). Replaced, under mu_ and stop_mu_, when a shard that died comes back;
  // the old connection is kept until stop(), since a sender may still hold it.
  std::vector<std::unique_ptr<Transport>> conns_, retired_;
  // Each connection's ZeroMQ transport (inside its ShapedTransport when shaped): stop() releases
  // their waiting senders before stopping any shard, since a thread waiting on one shard may be
  // what another shard's threads wait for.
  std::vector<ZmqTransport*> zmq_;
  std::mutex stop_mu_;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mu_;
  std::unordered_map<std::uint64_t, Pending> pending_;  // pieces, by sequence
  // Under mu_: the shard serving each shard's parts (itself until a fail-over), and the dead.
  std::vector<int> owner_;
  std::vector<char> dead_;
  std::string refusal_;  // under mu_
  std::atomic<std::uint64_t> seq_{0}, pushed_{0}, pulled_{0};
};

}  // namespace psbed::ps
