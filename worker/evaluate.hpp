// Test accuracy of a Net's current parameters over a whole data set (forward only).
#pragma once
#include "worker/net.hpp"
#include "workloads/dataset.hpp"

namespace psbed::worker {

// Fraction in [0, 1] of samples classified correctly; the last partial batch is padded.
double evaluate_accuracy(Net& net, const workloads::Dataset& data);

}  // namespace psbed::worker
