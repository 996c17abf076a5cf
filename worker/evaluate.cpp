#include "worker/evaluate.hpp"

#include <algorithm>
#include <vector>

namespace psbed::worker {

double evaluate_accuracy(Net& net, const workloads::Dataset& data) {
  if (data.size() == 0) return 0;
  const std::size_t b = static_cast<std::size_t>(net.batch());
  std::int64_t correct = 0;
  for (std::size_t start = 0; start < data.size(); start += b) {
    int n = static_cast<int>(std::min(b, data.size() - start));
    net.set_batch(data.image(start), data.labels.data() + start, n);
    net.forward_all();
    correct += net.compute_loss().correct;
  }
  return double(correct) / double(data.size());
}

}  // namespace psbed::worker
