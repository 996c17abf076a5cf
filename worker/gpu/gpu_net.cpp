// The GPU backend: fully-connected layers and convolutions on cuBLAS SGEMM (convolution as
// im2col + one GEMM over the whole batch), the rest in the small kernels of kernels.cu.
// Activations stay on the device in plain NCHW; every buffer is allocated once, for the batch
// size, when the net is built.
//
// Two streams. The compute stream runs the layers; the copy stream moves parameters up and
// gradients down through pinned host buffers (the ones param() and grad() return, so the
// parameter server reads and writes them with no further copy):
// - params_updated(t) copies tensor t up at once on the copy stream; forward of its layer waits
//   for that copy on the device, so a layer's upload overlaps the forward of the layers before.
// - backward(l) queues the layer's kernels, then the copy of its gradients down, then (ahead of
//   the caller) the kernels of layer l-1, and returns when the copy has landed: the gradients of
//   layer l go out to the network while layer l-1 is still computing.
// forward(l) returns when the layer has run: the per-layer times in a worker's trace are what
// the predictor profiles, and a queue-and-return forward would attribute them to the loss.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/param_init.hpp"
#include "core/trace.hpp"
#include "worker/gpu/cuda_handles.hpp"
#include "worker/gpu/kernels.hpp"
#include "worker/net.hpp"

namespace psbed::worker {

std::string gpu_unavailable_reason() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear the sticky status so a later query starts afresh
    // Without a driver the runtime speaks of an old driver ("CUDA driver version is
    // insufficient"), which sends people to upgrade one they do not have: say what is missing.
    if (!std::filesystem::exists("/dev/nvidiactl") && !std::filesystem::exists("/dev/nvidia0"))
      return std::string(
                 "no NVIDIA GPU driver is loaded here (no /dev/nvidia0); the CUDA runtime says: ") +
             cudaGetErrorString(e);
    return cudaGetErrorString(e);
  }
  if (n == 0) return "cudaGetDeviceCount reports 0 devices";
  // A device, and then cuBLAS: loaded here, so a machine without a GPU never maps it.
  return gpu::cublas_unavailable_reason();
}

namespace {

using gpu::check;
using gpu::cublas;

// Row-major C (m x n) = op(A) op(B) with K the inner dimension, on column-major cuBLAS: the
// column-major view of a row-major matrix is its transpose, so C^T = op(B)^T op(A)^T.
void gemm(cublasHandle_t h, bool ta, bool tb, int m, int n, int k, const float* a, const float* b,
          float* c) {
  const float one = 1.0f, zero = 0.0f;
  check(cublas().sgemm(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k,
                       &one, b, tb ? k : n, a, ta ? m : k, &zero, c, n),
        "cublasSgemm");
}

// What every layer sees of the net: the batch, the streams, shared scratch space.
struct Ctx {
  int n = 0;
  cudaStream_t compute = nullptr;
  cublasHandle_t blas = nullptr;
  float* col = nullptr;  // im2col matrix, sized for the largest convolution
  float* cm = nullptr;   // channel-major conv output / output gradient, likewise
};

class Layer {
 public:
  explicit Layer(const LayerSpec& s, int n)
      : s_(s),
        out(gpu::device_array<float>(std::size_t(n) * s.out.numel())),
        din(gpu::device_array<float>(std::size_t(n) * s.in.numel())) {}
  virtual ~Layer() = default;
  virtual void forward(Ctx& c, const float* in) = 0;
  // dout: gradient w.r.t. this layer's output; writes din when need_din.
  virtual void backward(Ctx& c, const float* in, const float* dout, bool need_din) = 0;
  const LayerSpec& spec() const { return s_; }

 protected:
  LayerSpec s_;

 public:
  gpu::DeviceArray<float> out, din;
};

// Weighted layers point at the net's device parameter and gradient buffers.
struct Weights {
  const float *w = nullptr, *b = nullptr;
  float *gw = nullptr, *gb = nullptr;
};

class FcLayer final : public Layer {
 public:
  FcLayer(const LayerSpec& s, int n, Weights p) : Layer(s, n), p_(p) {}
  void forward(Ctx& c, const float* in) override {
    const int i = int(s_.in.numel()), o = s_.out.c;
    gemm(c.blas, false, true, c.n, o, i, in, p_.w, out.get());  // Y = X W^T
    gpu::add_bias_rows(out.get(), p_.b, c.n, o, c.compute);
  }
  void backward(Ctx& c, const float* in, const float* dout, bool need_din) override {
    const int i = int(s_.in.numel()), o = s_.out.c;
    gemm(c.blas, true, false, o, i, c.n, dout, in, p_.gw);  // dW = dY^T X
    gpu::sum_cols(dout, p_.gb, c.n, o, c.compute);          // db = column sums of dY
    if (need_din) gemm(c.blas, false, false, c.n, i, o, dout, p_.w, din.get());  // dX = dY W
  }

 private:
  Weights p_;
};

class ConvLayer final : public Layer {
 public:
  ConvLayer(const LayerSpec& s, int n, Weights p)
      : Layer(s, n), p_(p), g_{n,        s.in.c, s.in.h,  s.in.w, s.kernel,
                               s.stride, s.pad,  s.out.h, s.out.w} {}
  std::int64_t col_floats() const { return g_.col_rows() * g_.col_cols(); }
  std::int64_t cm_floats() const { return std::int64_t(s_.out.c) * g_.col_cols(); }

  void forward(Ctx& c, const float* in) override {
    const int o = s_.out.c, k = int(g_.col_rows()), np = int(g_.col_cols());
    gpu::im2col(g_, in, c.col, c.compute);
    gemm(c.blas, false, false, o, np, k, p_.w, c.col, c.cm);  // [O][N*P] = W col
    gpu::cm_to_nchw_bias(c.cm, p_.b, out.get(), c.n, o, s_.out.h * s_.out.w, c.compute);
  }
  void backward(Ctx& c, const float* in, const float* dout, bool need_din) override {
    const int o = s_.out.c, k = int(g_.col_rows()), np = int(g_.col_cols());
    gpu::im2col(g_, in, c.col, c.compute);  // recomputed: cheaper than a col matrix per layer
    gpu::nchw_to_cm(dout, c.cm, c.n, o, s_.out.h * s_.out.w, c.compute);
    gemm(c.blas, false, true, o, k, np, c.cm, c.col, p_.gw);  // dW = dY' col^T
    gpu::sum_rows(c.cm, p_.gb, o, np, c.compute);
    if (!need_din) return;
    gemm(c.blas, true, false, k, np, o, p_.w, c.cm, c.col);  // dcol = W^T dY'
    gpu::col2im(g_, c.col, din.get(), c.compute);
  }

 private:
  Weights p_;
  gpu::ConvGeom g_;
};

class ReluLayer final : public Layer {
 public:
  using Layer::Layer;
  void forward(Ctx& c, const float* in) override {
    gpu::relu_forward(in, out.get(), std::int64_t(c.n) * s_.out.numel(), c.compute);
  }
  void backward(Ctx& c, const float* in, const float* dout, bool need_din) override {
    if (need_din)
      gpu::relu_backward(in, dout, din.get(), std::int64_t(c.n) * s_.in.numel(), c.compute);
  }
};

class MaxPoolLayer final : public Layer {
 public:
  MaxPoolLayer(const LayerSpec& s, int n)
      : Layer(s, n),
        g_{n, s.in.c, s.in.h, s.in.w, s.kernel, s.stride, s.pad, s.out.h, s.out.w},
        argmax_(gpu::device_array<int>(std::size_t(n) * s.out.numel())) {}
  void forward(Ctx& c, const float* in) override {
    gpu::maxpool_forward(g_, in, out.get(), argmax_.get(), c.compute);
  }
  void backward(Ctx& c, const float*, const float* dout, bool need_din) override {
    if (need_din) gpu::maxpool_backward(g_, dout, argmax_.get(), din.get(), c.compute);
  }

 private:
  gpu::PoolGeom g_;
  gpu::DeviceArray<int> argmax_;
};

// A copy traced on the h2d or d2h lane once its events have completed.
struct PendingCopy {
  std::string name, lane;
  cudaEvent_t begin, end;
  std::int64_t bytes, step;
};

class GpuNet final : public Net {
 public:
  GpuNet(const ModelSpec& spec, int batch, std::uint64_t seed) : spec_(spec), batch_(batch) {
    if (batch < 1) throw Error("batch must be at least 1, got " + std::to_string(batch));
    check(cudaSetDevice(0), "cudaSetDevice(0)");
    compute_ = gpu::make_stream();
    copy_ = gpu::make_stream();
    blas_ = gpu::make_cublas();
    check(cublas().set_stream(blas_.get(), compute_.get()), "cublasSetStream");
    // Plain FP32 GEMMs: the CPU backend is the reference, and TF32 would stray from it by ~1e-3.
    check(cublas().set_math_mode(blas_.get(), CUBLAS_DEFAULT_MATH), "cublasSetMathMode");

    const int nt = int(spec_.tensors.size());
    for (int t = 0; t < nt; ++t) {
      const std::size_t n = std::size_t(spec_.tensors[t].numel);
      host_param_.push_back(gpu::pinned_array<float>(n));
      host_grad_.push_back(gpu::pinned_array<float>(n));
      std::memset(host_grad_.back().get(), 0, n * sizeof(float));
      init_tensor(spec_, t, seed, host_param_.back().get());
      dev_param_.push_back(gpu::device_array<float>(n));
      dev_grad_.push_back(gpu::device_array<float>(n));
      check(cudaMemcpy(dev_param_.back().get(), host_param_.back().get(), n * sizeof(float),
                       cudaMemcpyHostToDevice),
            "cudaMemcpy of the initial parameters");
    }

    std::int64_t col = 0, cm = 0;
    for (const LayerSpec& s : spec_.layers) {
      std::unique_ptr<Layer> layer;
      switch (s.type) {
        case LayerType::kConv:
        case LayerType::kFc: {
          Weights p{dev_param_[s.tensors[0]].get(), dev_param_[s.tensors[1]].get(),
                    dev_grad_[s.tensors[0]].get(), dev_grad_[s.tensors[1]].get()};
          if (s.type == LayerType::kFc) {
            layer = std::make_unique<FcLayer>(s, batch, p);
          } else {
            auto conv = std::make_unique<ConvLayer>(s, batch, p);
            col = std::max(col, conv->col_floats());
            cm = std::max(cm, conv->cm_floats());
            layer = std::move(conv);
          }
          break;
        }
        case LayerType::kRelu:
          layer = std::make_unique<ReluLayer>(s, batch);
          break;
        case LayerType::kMaxPool:
          layer = std::make_unique<MaxPoolLayer>(s, batch);
          break;
      }
      layers_.push_back(std::move(layer));
    }
    const Shape& last = spec_.layers.back().out;
    if (last.numel() != spec_.classes)
      throw Error(spec_.source + ": the last layer gives " + last.str() + " per sample, expected " +
                  std::to_string(spec_.classes) + " class scores");
    col_ = gpu::device_array<float>(std::size_t(col));
    cm_ = gpu::device_array<float>(std::size_t(cm));
    ctx_ = Ctx{batch, compute_.get(), blas_.get(), col_.get(), cm_.get()};

    const std::size_t in = std::size_t(spec_.input.numel()) * batch;
    input_ = gpu::device_array<float>(in);
    host_input_ = gpu::pinned_array<float>(in);
    labels_ = gpu::device_array<std::int32_t>(batch);
    host_labels_ = gpu::pinned_array<std::int32_t>(batch);
    dlogits_ = gpu::device_array<float>(std::size_t(batch) * spec_.classes);
    nll_ = gpu::device_array<float>(batch);
    correct_ = gpu::device_array<int>(batch);
    host_nll_ = gpu::pinned_array<float>(batch);
    host_correct_ = gpu::pinned_array<int>(batch);

    const int nl = num_layers();
    for (auto* v : {&h2d_begin_, &h2d_end_, &d2h_begin_, &d2h_end_, &bwd_done_})
      for (int l = 0; l < nl; ++l) v->push_back(gpu::make_event());
    fence_ = gpu::make_event();
    ref_ = gpu::make_event();
    h2d_open_.assign(nl, false);
    h2d_bytes_.assign(nl, 0);
    bwd_queued_.assign(nl, false);
    check(cudaDeviceSynchronize(), "building the GPU net");
  }

  ~GpuNet() override { cudaDeviceSynchronize(); }

  const ModelSpec& spec() const override { return spec_; }
  int batch() const override { return batch_; }
  std::string device() const override { return "gpu"; }
  float* param(int t) override { return host_param_.at(t).get(); }
  const float* grad(int t) const override { return host_grad_.at(t).get(); }

  void params_updated(int t) override {
    const int l = spec_.tensors.at(t).layer;
    // The upload must not overwrite weights that kernels queued earlier still read.
    check(cudaEventRecord(fence_.get(), compute_.get()), "cudaEventRecord");
    check(cudaStreamWaitEvent(copy_.get(), fence_.get(), 0), "cudaStreamWaitEvent");
    if (!h2d_open_[l]) {
      check(cudaEventRecord(h2d_begin_[l].get(), copy_.get()), "cudaEventRecord");
      h2d_open_[l] = true;
      h2d_bytes_[l] = 0;
    }
    const std::size_t bytes = std::size_t(spec_.tensors[t].bytes());
    check(cudaMemcpyAsync(dev_param_[t].get(), host_param_[t].get(), bytes, cudaMemcpyHostToDevice,
                          copy_.get()),
          "cudaMemcpyAsync of parameters");
    check(cudaEventRecord(h2d_end_[l].get(), copy_.get()), "cudaEventRecord");
    h2d_bytes_[l] += std::int64_t(bytes);
  }

  void set_batch(const float* images, const std::int32_t* labels, int n) override {
    if (n < 1 || n > batch_)
      throw Error("batch of " + std::to_string(n) + " samples, expected 1.." +
                  std::to_string(batch_));
    drain();
    const std::int64_t per = spec_.input.numel();
    std::memcpy(host_input_.get(), images, std::size_t(per * n) * sizeof(float));
    std::memset(host_input_.get() + per * n, 0, std::size_t(per * (batch_ - n)) * sizeof(float));
    for (int i = 0; i < batch_; ++i) host_labels_[i] = i < n ? labels[i] : 0;
    check(
        cudaMemcpyAsync(input_.get(), host_input_.get(), std::size_t(per * batch_) * sizeof(float),
                        cudaMemcpyHostToDevice, compute_.get()),
        "cudaMemcpyAsync of the batch");
    check(cudaMemcpyAsync(labels_.get(), host_labels_.get(),
                          std::size_t(batch_) * sizeof(std::int32_t), cudaMemcpyHostToDevice,
                          compute_.get()),
          "cudaMemcpyAsync of the labels");
    valid_ = n;
  }

  void forward(int l) override {
    bwd_queued_[l] = false;
    wait_params(l);
    layers_.at(l)->forward(ctx_, l == 0 ? input_.get() : layers_[l - 1]->out.get());
    check(cudaGetLastError(), ("launching forward of " + spec_.layers[l].name).c_str());
    check(cudaStreamSynchronize(compute_.get()), ("forward of " + spec_.layers[l].name).c_str());
    flush_trace();
  }

  LossResult compute_loss() override {
    const int k = spec_.classes;
    for (int i = 0; i < valid_; ++i)
      if (host_labels_[i] < 0 || host_labels_[i] >= k)
        throw Error("label " + std::to_string(host_labels_[i]) + " of sample " + std::to_string(i) +
                    " in the batch is out of range 0.." + std::to_string(k - 1) + " (model '" +
                    spec_.name + "' has " + std::to_string(k) + " classes)");
    gpu::softmax_xent(layers_.back()->out.get(), labels_.get(), batch_, k, valid_, nll_.get(),
                      correct_.get(), dlogits_.get(), compute_.get());
    check(cudaMemcpyAsync(host_nll_.get(), nll_.get(), std::size_t(batch_) * sizeof(float),
                          cudaMemcpyDeviceToHost, compute_.get()),
          "cudaMemcpyAsync of the loss");
    check(cudaMemcpyAsync(host_correct_.get(), correct_.get(), std::size_t(batch_) * sizeof(int),
                          cudaMemcpyDeviceToHost, compute_.get()),
          "cudaMemcpyAsync of the accuracy");
    check(cudaStreamSynchronize(compute_.get()), "loss");
    // Summed in sample order in double, as the CPU backend does.
    double loss = 0;
    LossResult r;
    for (int i = 0; i < valid_; ++i) loss += host_nll_[i], r.correct += host_correct_[i];
    r.loss = float(loss / valid_);
    bwd_queued_.assign(num_layers(), false);
    return r;
  }

  void backward(int l) override {
    queue_backward(l);
    const bool has_grads = !spec_.layers[l].tensors.empty();
    check(cudaEventRecord(bwd_done_[l].get(), compute_.get()), "cudaEventRecord");
    if (has_grads) {
      check(cudaStreamWaitEvent(copy_.get(), bwd_done_[l].get(), 0), "cudaStreamWaitEvent");
      check(cudaEventRecord(d2h_begin_[l].get(), copy_.get()), "cudaEventRecord");
      std::int64_t bytes = 0;
      for (int t : spec_.layers[l].tensors) {
        bytes += spec_.tensors[t].bytes();
        check(cudaMemcpyAsync(host_grad_[t].get(), dev_grad_[t].get(),
                              std::size_t(spec_.tensors[t].bytes()), cudaMemcpyDeviceToHost,
                              copy_.get()),
              "cudaMemcpyAsync of gradients");
      }
      check(cudaEventRecord(d2h_end_[l].get(), copy_.get()), "cudaEventRecord");
      trace_copy("d2h", l, d2h_begin_[l].get(), d2h_end_[l].get(), bytes);
    }
    if (l > 0) queue_backward(l - 1);  // runs while this layer's gradients travel down
    check(cudaEventSynchronize(has_grads ? d2h_end_[l].get() : bwd_done_[l].get()),
          ("backward of " + spec_.layers[l].name).c_str());
    flush_trace();
  }

  void sgd_step(const SgdOptions& opt, std::vector<std::vector<float>>&) override {
    // The velocity lives on the device beside the parameters; the caller's stays unused.
    if (velocity_.empty())
      for (const auto& t : spec_.tensors)
        velocity_.push_back(gpu::device_array<float>(std::size_t(t.numel)));
    for (int t = 0; t < int(spec_.tensors.size()); ++t)
      gpu::sgd(dev_param_[t].get(), dev_grad_[t].get(), velocity_[t].get(), spec_.tensors[t].numel,
               opt.lr, opt.momentum, opt.weight_decay, compute_.get());
    check(cudaGetLastError(), "launching the SGD update");
    // The host copy of the parameters follows, so param() stays the truth the interface promises.
    for (int t = 0; t < int(spec_.tensors.size()); ++t)
      check(cudaMemcpyAsync(host_param_[t].get(), dev_param_[t].get(),
                            std::size_t(spec_.tensors[t].bytes()), cudaMemcpyDeviceToHost,
                            compute_.get()),
            "cudaMemcpyAsync of parameters");
    check(cudaStreamSynchronize(compute_.get()), "SGD update");
  }

  void read_output(int l, float* out) override {
    const std::size_t n = std::size_t(spec_.layers.at(l).out.numel()) * batch_;
    check(cudaStreamSynchronize(compute_.get()), "read_output");
    check(cudaMemcpy(out, layers_[l]->out.get(), n * sizeof(float), cudaMemcpyDeviceToHost),
          "cudaMemcpy");
  }

  void read_input_grad(int l, float* out) override {
    if (l == 0) throw Error("layer 0 has no input gradient: the first layer skips it");
    const std::size_t n = std::size_t(spec_.layers.at(l).in.numel()) * batch_;
    check(cudaStreamSynchronize(compute_.get()), "read_input_grad");
    check(cudaMemcpy(out, layers_[l]->din.get(), n * sizeof(float), cudaMemcpyDeviceToHost),
          "cudaMemcpy");
  }

  void set_trace(TraceRecorder* trace, std::function<std::int64_t()> step) override {
    drain();
    trace_ = trace && trace->enabled() ? trace : nullptr;
    step_ = std::move(step);
    reset_clock();
  }

 private:
  void wait_params(int l) {
    if (!h2d_open_[l]) return;
    check(cudaStreamWaitEvent(compute_.get(), h2d_end_[l].get(), 0), "cudaStreamWaitEvent");
    trace_copy("h2d", l, h2d_begin_[l].get(), h2d_end_[l].get(), h2d_bytes_[l]);
    h2d_open_[l] = false;
  }

  void queue_backward(int l) {
    if (bwd_queued_[l]) return;
    wait_params(l);
    const float* dout = l == num_layers() - 1 ? dlogits_.get() : layers_[l + 1]->din.get();
    layers_[l]->backward(ctx_, l == 0 ? input_.get() : layers_[l - 1]->out.get(), dout, l > 0);
    check(cudaGetLastError(), ("launching backward of " + spec_.layers[l].name).c_str());
    bwd_queued_[l] = true;
  }

  // Waits for everything queued; a new batch must not overwrite what is still being read.
  void drain() {
    check(cudaStreamSynchronize(copy_.get()), "copy stream");
    check(cudaStreamSynchronize(compute_.get()), "compute stream");
    // Uploads still marked open have landed; they are left out of the trace, since they began
    // before the reference event the next batch's times are taken against.
    h2d_open_.assign(h2d_open_.size(), false);
    flush_trace();
    reset_clock();
  }

  // Device event times become trace times through a reference event taken while both streams
  // are idle, against now_us() at that moment; renewed every batch so the clocks cannot drift.
  void reset_clock() {
    if (!trace_) return;
    check(cudaEventRecord(ref_.get(), compute_.get()), "cudaEventRecord");
    check(cudaEventSynchronize(ref_.get()), "cudaEventSynchronize");
    ref_us_ = now_us();
  }

  void trace_copy(const char* lane, int l, cudaEvent_t begin, cudaEvent_t end, std::int64_t bytes) {
    if (!trace_) return;
    pending_.push_back({std::string(lane) + ":" + spec_.layers[l].name, lane, begin, end, bytes,
                        step_ ? step_() : -1});
  }

  void flush_trace() {
    if (!trace_) return;
    std::vector<PendingCopy> left;
    for (auto& p : pending_) {
      float from_ref = 0, dur = 0;
      if (cudaEventQuery(p.end) != cudaSuccess ||
          cudaEventElapsedTime(&from_ref, ref_.get(), p.begin) != cudaSuccess ||
          cudaEventElapsedTime(&dur, p.begin, p.end) != cudaSuccess) {
        cudaGetLastError();
        left.push_back(p);
        continue;
      }
      TraceEvent e;
      e.name = p.name, e.lane = p.lane, e.step = p.step, e.bytes = p.bytes;
      e.ts_us = ref_us_ + 1e3 * from_ref, e.dur_us = 1e3 * dur;
      trace_->record(std::move(e));
    }
    pending_ = std::move(left);
  }

  ModelSpec spec_;
  int batch_;
  gpu::Stream compute_, copy_;
  gpu::Cublas blas_;
  std::vector<gpu::PinnedArray<float>> host_param_, host_grad_;
  std::vector<gpu::DeviceArray<float>> dev_param_, dev_grad_, velocity_;
  std::vector<std::unique_ptr<Layer>> layers_;
  gpu::DeviceArray<float> col_, cm_, input_, dlogits_, nll_;
  gpu::DeviceArray<std::int32_t> labels_;
  gpu::DeviceArray<int> correct_;
  gpu::PinnedArray<float> host_input_, host_nll_;
  gpu::PinnedArray<std::int32_t> host_labels_;
  gpu::PinnedArray<int> host_correct_;
  Ctx ctx_;
  int valid_ = 0;
  std::vector<gpu::Event> h2d_begin_, h2d_end_, d2h_begin_, d2h_end_, bwd_done_;
  gpu::Event fence_, ref_;
  std::vector<bool> h2d_open_, bwd_queued_;
  std::vector<std::int64_t> h2d_bytes_;
  TraceRecorder* trace_ = nullptr;
  std::function<std::int64_t()> step_;
  std::vector<PendingCopy> pending_;
  double ref_us_ = 0;
};

}  // namespace

std::unique_ptr<Net> make_gpu_net(const ModelSpec& spec, int batch, std::uint64_t seed) {
  if (std::string why = gpu_unavailable_reason(); !why.empty())
    throw DeviceUnavailable("no CUDA device available: " + why);
  return std::make_unique<GpuNet>(spec, batch, seed);
}

}  // namespace psbed::worker
