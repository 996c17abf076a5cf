// A transport for shard tests: it records what is sent over it and delivers to its receiver what
// the test hands it.
#pragma once
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "ps/transport.hpp"

namespace psbed::ps {

class FakeLink : public Transport {
 public:
  void start(ReceiveFn on_receive) override { receive_ = std::move(on_receive); }
  bool send(Message msg) override {
    std::lock_guard<std::mutex> l(mu_);
    sent_.push_back(std::move(msg));
    cv_.notify_all();
    return true;
  }
  void stop() override {}
  std::string endpoint() const override { return "fake"; }
  const BadMessageCounter& bad_messages() const override { return bad_; }
  void deliver(Message m) { receive_(std::move(m)); }
  // Waits (bounded) for the n-th message sent.
  Message wait_for(std::size_t n) {
    std::unique_lock<std::mutex> l(mu_);
    REQUIRE(cv_.wait_for(l, std::chrono::seconds(10), [&] { return sent_.size() >= n; }));
    return sent_[n - 1];
  }
  // How many were sent after a pause long enough for a lane to have sent more.
  std::size_t settled_count() {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::lock_guard<std::mutex> l(mu_);
    return sent_.size();
  }

 private:
  ReceiveFn receive_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Message> sent_;
  BadMessageCounter bad_;
};

}  // namespace psbed::ps
