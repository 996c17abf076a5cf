#include "ps/link.hpp"

#include <pthread.h>

#include <algorithm>

#include "core/units.hpp"
#include "ps/transport_thread.hpp"

namespace psbed::ps {

std::string LinkOptions::str() const {
  if (!shaped()) return "unshaped";
  return (bandwidth_bps > 0 ? format_bandwidth(bandwidth_bps) : std::string("unlimited")) + ", " +
         std::to_string(latency_s * 1e6).substr(0, std::to_string(latency_s * 1e6).find('.')) +
         " us one way";
}

LinkOptions parse_link(const std::string& bandwidth, const std::string& latency) {
  LinkOptions o;
  if (!bandwidth.empty() && bandwidth != "0") o.bandwidth_bps = parse_bandwidth_bps(bandwidth);
  if (!latency.empty()) o.latency_s = parse_duration_s(latency);
  return o;
}

TokenBucket::TokenBucket(double bytes_per_s, double burst_bytes)
    : rate_(bytes_per_s), burst_s_(burst_bytes / bytes_per_s) {}

TokenBucket::Clock::time_point TokenBucket::reserve(std::uint64_t bytes, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  // Idle time earns at most `burst` bytes of credit.
  const auto earliest =
      now - std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(burst_s_));
  if (next_free_ < earliest) next_free_ = earliest;
  next_free_ += std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(double(bytes) / rate_));
  return next_free_;
}

std::shared_ptr<LinkBuckets> LinkBuckets::make(const LinkOptions& o) {
  auto l = std::make_shared<LinkBuckets>();
  l->options = o;
  if (o.bandwidth_bps > 0) {
    const double rate = o.bandwidth_bps / 8;
    const double burst = std::max(64.0 * 1024, rate * 0.001);  // 1 ms of line rate, at least 64 KiB
    l->egress = std::make_shared<TokenBucket>(rate, burst);
    l->ingress = std::make_shared<TokenBucket>(rate, burst);
  }
  return l;
}

namespace {
std::uint64_t wire_bytes(const Message& m) { return kHeaderBytes + m.payload.size(); }
}  // namespace

ShapedTransport::ShapedTransport(std::unique_ptr<Transport> inner,
                                 std::shared_ptr<LinkBuckets> link)
    : inner_(std::move(inner)), link_(std::move(link)) {}

ShapedTransport::~ShapedTransport() { stop(); }

void ShapedTransport::start(ReceiveFn on_receive) {
  on_receive_ = std::move(on_receive);
  delivery_ = std::thread([this] { deliver_loop(); });
  inner_->start([this](Message&& m) {
    // The bucket passes the bytes now or later (unused credit dates its reservation back, up to
    // the burst: that is not an earlier arrival), then the latency: every message takes all of it.
    const auto now = TokenBucket::Clock::now();
    auto due = now;
    if (link_->ingress) due = std::max(now, link_->ingress->reserve(wire_bytes(m), now));
    due += std::chrono::duration_cast<TokenBucket::Clock::duration>(
        std::chrono::duration<double>(link_->options.latency_s));
    std::lock_guard<std::mutex> lock(mu_);
    arrivals_.emplace_back(due, std::move(m));
    cv_.notify_one();
  });
}

void ShapedTransport::deliver_loop() {
  pthread_setname_np(pthread_self(), "ps-link-in");
  const transport_thread::Scope marked;
  delivery_id_ = std::this_thread::get_id();
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !arrivals_.empty(); });
    if (stopping_) break;
    const auto due = arrivals_.front().first;
    if (TokenBucket::Clock::now() < due) {
      cv_.wait_until(lock, due, [&] { return stopping_; });
      continue;  // re-check: stopping, or the time has come
    }
    Message m = std::move(arrivals_.front().second);
    arrivals_.pop_front();
    lock.unlock();
    on_receive_(std::move(m));
    lock.lock();
  }
  delivery_id_ = std::thread::id();  // ids are reused: a later thread must not pass for this one
}

bool ShapedTransport::send(Message msg) {
  // From the callback: the delivery thread must not wait, here or in the inner transport.
  const bool from_callback = std::this_thread::get_id() == delivery_id_.load();
  if (!link_->egress && !from_callback) return inner_->send(std::move(msg));
  // Checked here, on the caller's thread: the pacing thread could only die of it.
  inner_->check_send(msg);
  if (!from_callback) transport_thread::assert_may_block("a send on a shaped link");
  const std::uint64_t bytes = wire_bytes(msg);
  std::unique_lock<std::mutex> lock(out_mu_);
  // A message bigger than the whole buffer still goes, alone.
  out_cv_.wait(lock, [&] {
    return from_callback || out_stopping_ || queued_bytes_ == 0 ||
           queued_bytes_ + bytes <= kSendBufferBytes;
  });
  if (out_stopping_) return false;
  if (!pacer_.joinable()) pacer_ = std::thread([this] { pace_loop(); });
  queued_bytes_ += bytes;
  auto it =
      std::find_if(out_.begin(), out_.end(), [&](const auto& q) { return q.first == msg.peer; });
  if (it == out_.end()) {
    out_.emplace_back(msg.peer, std::deque<Message>());
    it = std::prev(out_.end());
  }
  it->second.push_back(std::move(msg));
  out_cv_.notify_all();
  return true;
}

void ShapedTransport::pace_loop() {
  pthread_setname_np(pthread_self(), "ps-link-out");
  std::unique_lock<std::mutex> lock(out_mu_);
  for (;;) {
    out_cv_.wait(lock, [&] { return out_stopping_ || !out_.empty(); });
    if (out_stopping_) return;
    // The next peer in turn gives one message, then goes to the back of the line.
    auto turn = std::move(out_.front());
    out_.pop_front();
    Message m = std::move(turn.second.front());
    turn.second.pop_front();
    if (!turn.second.empty()) out_.push_back(std::move(turn));
    const std::uint64_t bytes = wire_bytes(m);
    if (link_->egress) {
      const auto due = link_->egress->reserve(bytes);
      if (out_cv_.wait_until(lock, due, [&] { return out_stopping_; })) return;
    }
    lock.unlock();
    inner_->send(std::move(m));
    lock.lock();
    queued_bytes_ -= bytes;
    out_cv_.notify_all();
  }
}

void ShapedTransport::stop() {
  {
    std::lock_guard<std::mutex> lock(out_mu_);
    out_stopping_ = true;
  }
  out_cv_.notify_all();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  // The inner transport first: the pacing thread may be inside its send(), waiting for room on
  // a link nobody reads, and only stopping it releases that send.
  inner_->stop();
  if (pacer_.joinable()) pacer_.join();
  if (delivery_.joinable()) delivery_.join();
}

}  // namespace psbed::ps
