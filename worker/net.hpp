// The compute side of a worker, one layer at a time. A Net owns the activations and, for every
// parameter tensor of the spec, a plain row-major host buffer for the values and one for the
// gradient: the parameter server pushes and pulls those buffers directly. Layer-wise calls let
// the training loop start a layer's forward as soon as its parameters arrived (dataflow) and
// hand a layer's gradients to the sender as soon as its backward ends (wait-free backprop).
//
// Two implementations: CPU (oneDNN) and, in worker/gpu, CUDA (cuBLAS).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/model_spec.hpp"
#include "core/optimizer.hpp"
#include "core/trace.hpp"

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

  // One SGD step on every tensor from grad() with the caller's velocity buffers (one per tensor,
  // numel floats, zero-initialised), then params_updated(). The default runs core/optimizer on
  // the host buffers; a device backend may keep the update on the device (and its own velocity),
  // but param() holds the new values on return either way.
  virtual void sgd_step(const SgdOptions& opt, std::vector<std::vector<float>>& velocity);

  // Copies a layer's output, or the gradient with respect to its input (absent for layer 0),
  // in plain NCHW order into out (batch() * the shape's numel floats). For tests that compare
  // backends layer by layer; slow. The default, for a backend without activations, throws Error.
  virtual void read_output(int layer, float* out);
  virtual void read_input_grad(int layer, float* out);

  // A fully-connected layer's sufficient factors from the last forward and backward: its input
  // (batch() x in-features, plain, padding rows included) into x, the gradient with respect to
  // its output (batch() x out-features) into dy. dy^T x is the weight gradient and dy's column
  // sums the bias's, so peers rebuild both from these (worker/sfb.hpp). Call after backward(layer)
  // and before the next forward. The default, for a backend without them, throws Error.
  virtual void read_factors(int layer, float* x, float* dy);

  // Host-device copies of a device backend go to `trace` on the lanes "h2d" and "d2h", named
  // "h2d:<layer>" / "d2h:<layer>" with the step `step()` returns. The CPU backend has none.
  virtual void set_trace(TraceRecorder* trace, std::function<std::int64_t()> step) {}
};

// Parameters are initialised with init_tensor(spec, t, seed, ...).
std::unique_ptr<Net> make_cpu_net(const ModelSpec& spec, int batch, std::uint64_t seed);
// "cpu" or "gpu"; for "gpu" without a usable device throws
// DeviceUnavailable("no CUDA device available: <reason from the CUDA runtime>").
std::unique_ptr<Net> make_net(const std::string& device, const ModelSpec& spec, int batch,
                              std::uint64_t seed);
// Throws what make_net would for a device that cannot be used here, without building a net:
// lets a command fail before it loads data or joins a cluster.
void require_device(const std::string& device);
// Empty when a CUDA device can be used, else why not (the CUDA runtime's words).
std::string gpu_unavailable_reason();

}  // namespace psbed::worker
