// The simulator's pending events, and the ring-buffer queue it keeps everywhere: the hot path of
// every simulation, so each kind of event sits in the cheapest structure for its shape.
// Internal to the simulator (predictor/sim/).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <queue>
#include <utility>
#include <vector>

namespace psbed::predictor::sim {

enum class EventType : std::uint8_t {
  kComputeDone,
  kDeliver,
  kChannelDone,
  kApplyDone,
  kEgressDone,
  kFactorsLeft
};

// A first-in first-out queue in one ring buffer that doubles when full: what std::deque does
// here, for a fraction of its cost per push and pop (the simulator's queues are its hot path).
template <class T>
class Fifo {
 public:
  Fifo() = default;
  Fifo(const Fifo& o) { *this = o; }
  Fifo(Fifo&& o) noexcept { *this = std::move(o); }
  Fifo& operator=(const Fifo& o) {
    store_ = o.store_;
    return adopt(o);
  }
  Fifo& operator=(Fifo&& o) noexcept {
    store_ = std::move(o.store_);
    adopt(o);
    o.store_.clear(), o.buf_ = nullptr, o.cap_ = o.mask_ = o.head_ = o.size_ = 0;
    return *this;
  }
  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  T& front() { return buf_[head_]; }
  const T& front() const { return buf_[head_]; }
  const T& back() const { return buf_[(head_ + size_ - 1) & mask_]; }
  void push_back(const T& v) {
    if (size_ == cap_) grow();
    buf_[(head_ + size_) & mask_] = v;
    ++size_;
  }
  void pop_front() {
    head_ = (head_ + 1) & mask_;
    --size_;
  }

 private:
  // The capacity and its mask are kept beside the buffer: a vector's size() divides by the
  // element's size, on every push and pop.
  [[gnu::noinline]] void grow() {
    std::vector<T> bigger(std::max<std::size_t>(8, 2 * cap_));
    for (std::size_t i = 0; i < size_; ++i) bigger[i] = buf_[(head_ + i) & mask_];
    store_.swap(bigger);
    buf_ = store_.data();
    cap_ = store_.size();
    mask_ = cap_ - 1;
    head_ = 0;
  }
  Fifo& adopt(const Fifo& o) {
    buf_ = store_.data(), cap_ = o.cap_, mask_ = o.mask_, head_ = o.head_, size_ = o.size_;
    return *this;
  }
  std::vector<T> store_;  // capacity a power of two
  T* buf_ = nullptr;      // store_.data()
  std::size_t cap_ = 0, mask_ = 0;
  std::size_t head_ = 0, size_ = 0;
};

struct Event {
  double t;
  std::uint64_t seq;  // ties at one instant go in the order they were scheduled
  EventType type;
  int a;  // worker, message id, channel, or shard lane
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

// Pending events, kept in the cheapest structure for their shape, since the queue is most of
// the simulator's cost:
//  - fair links deliver every message one latency after it is scheduled, so deliveries come
//    due in the order they were scheduled: one FIFO;
//  - a channel (fair links) has at most one pending completion, moved in place when rates
//    change; a stream (bucket links: one node's uplink departures, one node's arrivals) comes
//    due in order. Both are slots of one indexed heap keyed by their next event, so the heap
//    holds a slot per channel or stream, not an entry per message, and has no stale entries;
//  - compute and apply events, a few per node, and anything out of order go to a plain heap.
class EventQueue {
 public:
  void set_slots(std::size_t channels, std::size_t streams) {
    channels_ = channels;
    pos_.assign(channels + streams, -1);
    key_.assign(channels + streams, Event{});
    streams_.assign(streams, {});
  }
  void push(double t, EventType type, int a) {
    const Event e{t, seq_++, type, a};
    if (type == EventType::kDeliver && (fifo_.empty() || fifo_.back().t <= t))
      fifo_.push_back(e);
    else
      heap_.push(e);
  }
  // Appends to stream k; an event earlier than the stream's last goes to the plain heap.
  void push_stream(int k, double t, EventType type, int a) {
    const Event e{t, seq_++, type, a};
    auto& q = streams_[std::size_t(k)];
    if (!q.empty() && q.back().t > t) {
      heap_.push(e);
      return;
    }
    q.push_back(e);
    if (q.size() == 1) {
      const int slot = int(channels_) + k;
      if (slot == vacated_) vacated_ = -1;  // back in place: one sift instead of out and in
      set_slot(slot, e);
    }
  }
  // Schedules (or moves) channel c's completion.
  void set_channel(int c, double t) { set_slot(c, Event{t, seq_++, EventType::kChannelDone, c}); }
  void clear_channel(int c) { clear_slot(c); }
  bool empty() {
    settle();
    return fifo_.empty() && heap_.empty() && cheap_.empty();
  }
  const Event* top() {
    Source from;
    return earliest(from);
  }
  // Takes the earliest event into `e`; false when none is left. A channel completion stays
  // queued: its handler moves it (set_channel, the common case of a next message on the same
  // pair, costs one sift) or removes it (clear_channel).
  bool pop(Event& e) {
    Source from;
    const Event* best = earliest(from);
    if (!best) return false;
    e = *best;
    if (from == Source::kFifo) {
      fifo_.pop_front();
    } else if (from == Source::kSlot) {
      const int slot = cheap_[0].slot;
      if (slot >= int(channels_)) {
        auto& q = streams_[std::size_t(slot) - channels_];
        q.pop_front();
        if (q.empty())
          vacated_ = slot;  // most often refilled by the handler (a node's next departure)
        else
          key_[slot] = q.front(), sift_down(0, Item{q.front().t, q.front().seq, slot});
      }
    } else {
      heap_.pop();
    }
    return true;
  }

 private:
  enum class Source { kNone, kFifo, kHeap, kSlot };
  // The earliest pending event and where it is held; nullptr when none is left.
  const Event* earliest(Source& from) {
    settle();
    const Event* best = nullptr;
    from = Source::kNone;
    if (!fifo_.empty()) best = &fifo_.front(), from = Source::kFifo;
    if (!heap_.empty() && (!best || *best > heap_.top())) best = &heap_.top(), from = Source::kHeap;
    if (!cheap_.empty() && (!best || before(cheap_[0], *best)))
      best = &key_[cheap_[0].slot], from = Source::kSlot;
    return best;
  }
  // A stream that emptied at the last pop keeps its slot, with its old key, until the next look
  // at the queue: the handler usually schedules the stream's next event, which then moves the
  // slot once rather than leaving the heap and entering it again.
  void settle() {
    if (vacated_ >= 0) clear_slot(vacated_), vacated_ = -1;
  }
  // Sets slot s's next event. A slot not in the heap enters at the bottom and rises; one in it
  // moves whichever way its new key says (a stream's next event is never earlier than its last,
  // so it only sinks).
  void set_slot(int s, const Event& e) {
    key_[s] = e;
    const Item item{e.t, e.seq, s};
    if (pos_[s] < 0) {
      cheap_.push_back(item);
      sift_up(int(cheap_.size()) - 1, item);
    } else if (before(item, cheap_[pos_[s]])) {
      sift_up(pos_[s], item);
    } else {
      sift_down(pos_[s], item);
    }
  }
  void clear_slot(int s) {
    const int i = pos_[s];
    if (i < 0) return;
    pos_[s] = -1;
    const Item last = cheap_.back();
    cheap_.pop_back();
    if (i == int(cheap_.size())) return;
    if (i > 0 && before(last, cheap_[(i - 1) / 2]))
      sift_up(i, last);
    else
      sift_down(i, last);
  }
  struct Item {  // a slot's key, kept in the heap itself so comparisons read no other array
    double t;
    std::uint64_t seq;
    int slot;
  };
  static bool before(const Item& x, const Item& y) {
    return x.t != y.t ? x.t < y.t : x.seq < y.seq;
  }
  static bool before(const Item& x, const Event& y) {
    return x.t != y.t ? x.t < y.t : x.seq < y.seq;
  }
  void place(int i, const Item& item) { cheap_[i] = item, pos_[item.slot] = i; }
  // Moves `item` up from the hole at i to its place.
  void sift_up(int i, const Item& item) {
    while (i > 0) {
      const int parent = (i - 1) / 2;
      if (!before(item, cheap_[parent])) break;
      place(i, cheap_[parent]);
      i = parent;
    }
    place(i, item);
  }
  // Moves `item` down from the hole at i to its place.
  void sift_down(int i, const Item& item) {
    const int n = int(cheap_.size());
    for (;;) {
      int c = 2 * i + 1;
      if (c >= n) break;
      if (c + 1 < n && before(cheap_[c + 1], cheap_[c])) ++c;
      if (!before(cheap_[c], item)) break;
      place(i, cheap_[c]);
      i = c;
    }
    place(i, item);
  }
  std::size_t channels_ = 0;
  Fifo<Event> fifo_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> heap_;
  std::vector<Item> cheap_;  // slots with a pending event, a binary heap on their keys
  std::vector<int> pos_;     // slot -> index in cheap_, -1 if none pending
  std::vector<Event> key_;   // each slot's next event
  std::vector<Fifo<Event>> streams_;
  std::uint64_t seq_ = 0;
  int vacated_ = -1;
};

}  // namespace psbed::predictor::sim
