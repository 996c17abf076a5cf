#include "ps/prediction_runner.hpp"

#include <pthread.h>

#include <exception>
#include <utility>

namespace psbed::ps {

PredictionRunner::~PredictionRunner() {
  if (thread_.joinable()) thread_.join();
}

bool PredictionRunner::request(const std::string& key, std::function<double()> compute,
                               Answer answer) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!running_ && !known_key_.empty() && key == known_key_) {
    const double figure = known_;
    lock.unlock();
    answer(figure, "");
    return true;
  }
  if (running_) {
    if (key != running_key_ || waiting_.size() >= kMaxWaiting) return false;
    waiting_.push_back(std::move(answer));
    return true;
  }
  // The last computation has answered and is leaving: its thread ends at once.
  if (thread_.joinable()) thread_.join();
  running_ = true;
  running_key_ = key;
  waiting_.assign(1, std::move(answer));
  thread_ = std::thread([this, key, compute = std::move(compute)]() mutable {
    pthread_setname_np(pthread_self(), "predict");
    run(std::move(key), std::move(compute));
  });
  return true;
}

void PredictionRunner::run(std::string key, std::function<double()> compute) {
  std::optional<double> figure;
  std::string error;
  try {
    figure = compute();
  } catch (const std::exception& e) {
    error = e.what();
  }
  std::vector<Answer> waiting;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (figure) known_key_ = key, known_ = *figure;
    running_ = false;
    waiting.swap(waiting_);
  }
  for (Answer& a : waiting) a(figure, error);
}

}  // namespace psbed::ps
