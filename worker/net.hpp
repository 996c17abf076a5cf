// The compute side of a worker, one layer at a time. A Net owns the activations and, for every
// parameter tensor of the spec, a plain row-major host buffer for the values and one for the
// gradient: the parameter server pushes and pulls those buffers directly. Layer-wise calls let
// the training loop start a layer's forward as soon as its parameters arrived (dataflow) and
// hand a layer's gradients to the sender as soon as its backward ends (wait-free backprop).
//
// Two implementations: CPU (oneDNN) and, in worker/gpu, CUDA (cuBLAS).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "core/model_spec.hpp"

namespace psbed::worker {

struct LossResult {
  float loss = 0;   // mean cross-entropy over the valid samples
  int correct = 0;  // valid samples whose arg-max equals the label
};

class Net {
 public:
  virtual ~Net() = default;
  virtual const ModelSpec& spec() const = 0;
  virtual int batch() const = 0;
  virtual std::string device() const = 0;  // "cpu" or "gpu"

  // Host buffers of tensor t (spec().tensors[t]); param may be written, then
  // params_updated() must be called before the next forward of that tensor's layer.
  virtual float* param(int tensor) = 0;
  virtual const float* grad(int tensor) const = 0;
  virtual void params_updated(int tensor) = 0;
  void all_params_updated();

  // One step: set_batch, forward(0 .. L-1), compute_loss, backward(L-1 .. 0).
  // n <= batch(): samples past n are padding, excluded from loss, accuracy and gradients.
  virtual void set_batch(const float* images, const std::int32_t* labels, int n) = 0;
  virtual void forward(int layer) = 0;
  virtual LossResult compute_loss() = 0;
  // On return, the gradients of the layer's tensors are in grad(). The first layer skips the
  // gradient with respect to its input.
  virtual void backward(int layer) = 0;

  int num_layers() const { return static_cast<int>(spec().layers.size()); }
  void forward_all();
  void backward_all();
};

// Parameters are initialised with init_tensor(spec, t, seed, ...).
std::unique_ptr<Net> make_cpu_net(const ModelSpec& spec, int batch, std::uint64_t seed);
// "cpu" or "gpu"; for "gpu" without a usable device throws Error("no CUDA device available: ...").
std::unique_ptr<Net> make_net(const std::string& device, const ModelSpec& spec, int batch,
                              std::uint64_t seed);

}  // namespace psbed::worker
