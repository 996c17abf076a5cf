// What test_transport.cpp and test_transport_contract.cpp both build their cases from: the two
// ends' options, patterned payloads, Push messages, and an inbox that collects what a transport
// delivers. Every wait here is bounded by kWait: a broken transport fails a check, it never hangs.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ps/transport_thread.hpp"
#include "ps/zmq_transport.hpp"

namespace psbed::ps::test {

constexpr std::chrono::seconds kWait{10};

inline ZmqOptions server_options() {
  ZmqOptions o;
  o.role = ZmqOptions::Role::kServer;
  o.endpoint = "tcp://127.0.0.1:*";
  return o;
}

inline ZmqOptions client_options(const std::string& endpoint, const std::string& identity) {
  ZmqOptions o;
  o.role = ZmqOptions::Role::kClient;
  o.endpoint = endpoint;
  o.identity = identity;
  return o;
}

using Bytes = std::shared_ptr<const std::vector<std::uint8_t>>;

// `bytes` bytes that differ with `seed` and along the buffer, so a reordered or shifted copy
// does not compare equal.
inline Bytes pattern(std::size_t bytes, std::uint8_t seed) {
  auto v = std::make_shared<std::vector<std::uint8_t>>(bytes);
  for (std::size_t i = 0; i < bytes; ++i)
    (*v)[i] = static_cast<std::uint8_t>(i * 31 + seed + (i >> 12));
  return v;
}

inline Message push_message(const Payload& payload, std::uint32_t key, std::uint64_t sequence) {
  Message m;
  m.header.op = Op::kPush;
  m.header.key = key;
  m.header.length = payload.size();
  m.header.sequence = sequence;
  m.payload = payload;
  return m;
}

inline Message push(const Bytes& bytes, std::uint32_t key, std::uint64_t sequence) {
  return push_message(Payload::share(bytes), key, sequence);
}

// What a transport delivered, and whether each callback ran on a transport thread. Held on the
// stack (fn()) where the transport dies first, or shared (into()) so a transport that outlives a
// failed case still has somewhere to deliver.
class Inbox {
 public:
  void add(Message&& m) {
    std::lock_guard<std::mutex> lock(mu_);
    off_transport_thread_ = off_transport_thread_ || !transport_thread::current();
    messages_.push_back(std::move(m));
    cv_.notify_all();
  }
  ReceiveFn fn() {
    return [this](Message&& m) { add(std::move(m)); };
  }
  bool wait_for(std::size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kWait, [&] { return messages_.size() >= n; });
  }
  std::vector<Message> messages() {
    std::lock_guard<std::mutex> lock(mu_);
    return messages_;
  }
  bool off_transport_thread() {
    std::lock_guard<std::mutex> lock(mu_);
    return off_transport_thread_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Message> messages_;
  bool off_transport_thread_ = false;
};

inline ReceiveFn into(const std::shared_ptr<Inbox>& inbox) {
  return [inbox](Message&& m) { inbox->add(std::move(m)); };
}

}  // namespace psbed::ps::test
