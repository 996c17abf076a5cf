// The coordinator's /api/prediction figure, computed away from the thread that asked: a
// simulation may take seconds, and the HTTP server answers every request from one thread, so a
// prediction computed there stopped /api/status from answering (and a run watched through it was
// taken for dead). One computation at a time, each on a thread of its own; its figure is kept
// for its key (the configuration it is for), and every request for that key while it runs waits
// for the same figure.
#pragma once
#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace psbed::ps {

class PredictionRunner {
 public:
  // The figure, or nullopt and why the computation failed.
  using Answer = std::function<void(std::optional<double> figure, const std::string& error)>;
  PredictionRunner() = default;
  PredictionRunner(const PredictionRunner&) = delete;
  PredictionRunner& operator=(const PredictionRunner&) = delete;
  // Waits for a computation under way: it uses nothing of its owner's but this object.
  ~PredictionRunner();

  // Answers at once where `key`'s figure is known; else starts `compute` on a thread of its own,
  // or waits for the one under way for `key`, and answers from that thread. Returns false (and
  // answers nothing) while another key's computation runs or too many requests wait already.
  bool request(const std::string& key, std::function<double()> compute, Answer answer);

  static constexpr std::size_t kMaxWaiting = 64;

 private:
  void run(std::string key, std::function<double()> compute);
  std::mutex mu_;
  std::string known_key_;
  double known_ = 0;
  bool running_ = false;
  std::string running_key_;
  std::vector<Answer> waiting_;
  std::thread thread_;
};

}  // namespace psbed::ps
