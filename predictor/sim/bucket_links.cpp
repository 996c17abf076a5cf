// Bucket links: psbed's in-process link emulation (ps/link.cpp), as `psbed launch --bandwidth`
// measures it.
#include "predictor/sim/simulation.hpp"

namespace psbed::predictor::sim {

void Simulation::send_from(int thread, int id) {
  // An unshaped sender has no send buffer nor pacer (the live node sends straight away); the
  // receiver's bucket, where it has one, still passes the bytes.
  if (!shaped(sender_node(messages_[id]))) {
    if (is_factors(messages_[id])) factor_departed(messages_[id]);
    through_ingress(id);
    return;
  }
  // A thread that is not waiting has nothing queued before this message.
  SendThread& th = threads_[std::size_t(thread)];
  if (th.blocked || !enqueue(thread, id)) th.outbox.push_back(id);
}

// Moves the thread's queued sends into their buffers while there is room. False if the thread
// now waits for room.
bool Simulation::flush(int thread) {
  SendThread& th = threads_[std::size_t(thread)];
  while (!th.outbox.empty()) {
    if (!enqueue(thread, th.outbox.front())) return false;
    th.outbox.pop_front();
  }
  return true;
}

// Puts one message into its send buffer and in its peer's turn at the pacer, if there is room
// (a message goes alone into an empty buffer, however big); else the thread waits for room.
inline bool Simulation::enqueue(int thread, int id) {
  const Message& m = messages_[id];
  SendBuffer& b = buffers_[buffer_of(m)];
  const double bytes = sent_bytes(m);
  if (!room_for(b, bytes)) {
    threads_[std::size_t(thread)].blocked = true;
    b.waiting.push_back(thread);
    return false;
  }
  b.queued += bytes;
  const int node = sender_node(m);
  // A worker's peers: the shards, then the workers it sends factors to.
  // A shard's: the workers, then its backup.
  const int peer = is_replica(m)   ? W_
                   : to_server(m)  ? m.shard
                   : is_factors(m) ? S_ + m.shard
                                   : m.worker;
  Egress& e = egress_[std::size_t(node)];
  auto& q = e.per_peer[std::size_t(peer)];
  if (q.empty()) e.turn.push_back(peer);
  q.push_back(id);
  if (!e.pacing) pace(node);
  return true;
}

// The pacer takes the next peer's oldest message and waits for its bytes to leave. A message
// the bucket lets go at once (a request or an ack inside the burst allowance: most of them)
// leaves here rather than through an event at this same instant, unless threads wait for room
// in its buffer (their retry must not run inside the caller's send); this saves a fifth of
// the events of a many-worker run.
void Simulation::pace(int node) {
  Egress& e = egress_[std::size_t(node)];
  e.pacing = true;
  while (!e.turn.empty()) {
    const int peer = e.turn.front();
    e.turn.pop_front();
    auto& q = e.per_peer[std::size_t(peer)];
    const int id = q.front();
    q.pop_front();
    if (!q.empty()) e.turn.push_back(peer);
    const Message& m = messages_[id];
    // A reservation in the past (unused burst) means the message leaves now.
    const double out =
        std::max(now_, reserve(node, egress_free_[std::size_t(node)], now_, sent_bytes(m)));
    if (out > now_ || !buffers_[buffer_of(m)].waiting.empty()) {
      events_.push_stream(node, out, EventType::kEgressDone, id);
      return;
    }
    depart(id);
  }
  e.pacing = false;
}

// A message's bytes left its sender: out of the send buffer, through the receiver's downlink.
inline void Simulation::depart(int id) {
  const Message& m = messages_[id];
  buffers_[buffer_of(m)].queued -= sent_bytes(m);
  if (is_factors(m)) factor_departed(m);
  through_ingress(id);
}

// A message on its way: the host's copies, the receiver's downlink bucket (if shaped), the
// latency.
inline void Simulation::through_ingress(int id) {
  const Message& m = messages_[id];
  const double bytes = message_bytes(m);
  const double in = now_ + bytes * cfg_.transit_s_per_byte;
  const int to = receiver_node(m);
  const double due =
      shaped(to)
          ? std::max(in, reserve(to, ingress_free_[std::size_t(to)], in, bytes * copies_at(m, to)))
          : in;
  arrive(id, due + cfg_.latency_s);
}

void Simulation::egress_done(int id) {
  const int node = sender_node(messages_[id]);
  SendBuffer& b = buffers_[buffer_of(messages_[id])];
  depart(id);
  pace(node);
  // Room in the buffer: the threads waiting on it try again, in the order they blocked.
  if (b.waiting.empty()) return;
  // Swapped with a scratch list kept across calls (this runs for every other message at many
  // workers); nothing below comes back here, since departures in place retry nobody. A thread
  // whose next message still does not fit stays blocked, back in the list in its turn, as its
  // retry would leave it.
  retry_.swap(b.waiting);
  b.waiting.clear();
  for (int thread : retry_) {
    SendThread& th = threads_[std::size_t(thread)];
    if (!room_for(b, sent_bytes(messages_[th.outbox.front()]))) {
      b.waiting.push_back(thread);
      continue;
    }
    th.blocked = false;
    if (flush(thread)) resume(thread);
  }
}

// A thread's sends all went into their buffers: it carries on where it stopped.
void Simulation::resume(int thread) {
  if (thread < W_) {
    advance(thread);
  } else if (thread < 2 * W_) {
    Worker& w = workers_[std::size_t(thread - W_)];
    while (!w.held.empty() && !threads_[std::size_t(thread)].blocked) {
      const int id = w.held.front();
      w.held.pop_front();
      finish(id);
    }
  } else if (thread < reply_thread(0)) {
    start_lane(thread - 2 * W_);
  }  // a shard's reply thread only sends: nothing else waited
}

}  // namespace psbed::predictor::sim
