// The CPU backend on oneDNN. Each layer creates its primitives once, for the batch size, with
// memory formats left to oneDNN ("any"): convolutions then run on blocked layouts (nChw16c
// with AVX-512) end to end, and a reorder is inserted only where a consumer wants a layout its
// producer did not make (Converter). Parameters and gradients stay plain row-major on the host,
// since that is what crosses the wire; weights are reordered into the primitive's layout when
// they change, and weight gradients out of it after backward.
#include <algorithm>
#include <cmath>
#include <dnnl.hpp>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/param_init.hpp"
#include "worker/net.hpp"

namespace psbed::worker {
namespace {

using dnnl::algorithm;
using dnnl::engine;
using dnnl::memory;
using dnnl::prop_kind;
using dnnl::stream;
using tag = memory::format_tag;
using dt = memory::data_type;

struct Ctx {
  engine eng{engine::kind::cpu, 0};
  stream strm{eng};
};

// Gives a memory in the layout a primitive wants, reordering from whatever it is handed; the
// reorder primitive and buffer are made once and reused while the layouts stay the same.
class Converter {
 public:
  memory operator()(Ctx& c, const memory& have, const memory::desc& want) {
    if (have.get_desc() == want) return have;
    if (!buf_ || buf_.get_desc() != want || from_ != have.get_desc()) {
      buf_ = memory(want, c.eng);
      from_ = have.get_desc();
      reorder_ = dnnl::reorder(have, buf_);
    }
    reorder_.execute(c.strm, const_cast<memory&>(have), buf_);
    return buf_;
  }

 private:
  memory buf_;
  memory::desc from_;
  dnnl::reorder reorder_;
};

// A copy of plain host weights in a primitive's layout, refreshed only when marked stale.
class WeightCache {
 public:
  void init(Ctx& c, const memory& user, const memory::desc& want) {
    user_ = user;
    if (want == user.get_desc()) {
      mem_ = user;
    } else {
      mem_ = memory(want, c.eng);
      reorder_ = dnnl::reorder(user_, mem_);
    }
  }
  const memory& get(Ctx& c) {
    if (stale_ && mem_ != user_) reorder_.execute(c.strm, user_, mem_);
    stale_ = false;
    return mem_;
  }
  void mark_stale() { stale_ = true; }

 private:
  memory user_, mem_;
  dnnl::reorder reorder_;
  bool stale_ = true;
};

class Layer {
 public:
  virtual ~Layer() = default;
  // Creates the primitives for an input in layout `in`; returns the output layout.
  virtual memory::desc build(Ctx& c, const memory::desc& in) = 0;
  virtual void forward(Ctx& c, const memory& in) = 0;
  // diff_dst: the gradient w.r.t. this layer's output, in any layout.
  virtual void backward(Ctx& c, const memory& in, const memory& diff_dst, bool need_diff_src) = 0;
  virtual void params_updated() {}
  memory dst, diff_src;
};

memory::desc any_desc(const memory::dims& d) { return memory::desc(d, dt::f32, tag::any); }

// Convolution and inner product: identical handling of weights, bias and their gradients.
template <class Fwd, class BwdData, class BwdWeights>
class WeightedLayer : public Layer {
 public:
  WeightedLayer(float* w, float* b, float* gw, float* gb, bool first)
      : w_(w), b_(b), gw_(gw), gb_(gb), first_(first) {}

  void forward(Ctx& c, const memory& in) override {
    memory src = cv_src_(c, in, fwd_pd_.src_desc());
    fwd_.execute(c.strm, {{DNNL_ARG_SRC, src},
                          {DNNL_ARG_WEIGHTS, w_fwd_.get(c)},
                          {DNNL_ARG_BIAS, b_user_},
                          {DNNL_ARG_DST, dst}});
  }

  void backward(Ctx& c, const memory& in, const memory& diff_dst, bool need_diff_src) override {
    memory src = cv_src_bw_(c, in, bw_pd_.src_desc());
    memory dd = cv_dd_w_(c, diff_dst, bw_pd_.diff_dst_desc());
    bw_.execute(c.strm, {{DNNL_ARG_SRC, src},
                         {DNNL_ARG_DIFF_DST, dd},
                         {DNNL_ARG_DIFF_WEIGHTS, gw_prim_},
                         {DNNL_ARG_DIFF_BIAS, gb_user_}});
    if (gw_prim_ != gw_user_) gw_out_.execute(c.strm, gw_prim_, gw_user_);
    if (need_diff_src && !first_) {
      memory dd2 = cv_dd_d_(c, diff_dst, bd_pd_.diff_dst_desc());
      bd_.execute(c.strm, {{DNNL_ARG_DIFF_DST, dd2},
                           {DNNL_ARG_WEIGHTS, w_bwd_.get(c)},
                           {DNNL_ARG_DIFF_SRC, diff_src}});
    }
  }

  void params_updated() override {
    w_fwd_.mark_stale();
    w_bwd_.mark_stale();
  }

 protected:
  // Called by build() of the concrete layer with its three primitive descriptors.
  void finish(Ctx& c, const memory::desc& w_plain, const memory::desc& b_md,
              typename Fwd::primitive_desc fwd_pd, typename BwdWeights::primitive_desc bw_pd,
              typename BwdData::primitive_desc bd_pd) {
    fwd_pd_ = fwd_pd;
    bw_pd_ = bw_pd;
    bd_pd_ = bd_pd;
    fwd_ = Fwd(fwd_pd_);
    bw_ = BwdWeights(bw_pd_);
    memory w_user(w_plain, c.eng, w_);
    b_user_ = memory(b_md, c.eng, b_);
    gw_user_ = memory(w_plain, c.eng, gw_);
    gb_user_ = memory(b_md, c.eng, gb_);
    w_fwd_.init(c, w_user, fwd_pd_.weights_desc());
    if (bw_pd_.diff_weights_desc() == w_plain) {
      gw_prim_ = gw_user_;
    } else {
      gw_prim_ = memory(bw_pd_.diff_weights_desc(), c.eng);
      gw_out_ = dnnl::reorder(gw_prim_, gw_user_);
    }
    if (bw_pd_.diff_bias_desc() != b_md)
      throw Error("oneDNN chose a non-plain bias gradient layout");
    dst = memory(fwd_pd_.dst_desc(), c.eng);
    if (!first_) {
      bd_ = BwdData(bd_pd_);
      w_bwd_.init(c, w_user, bd_pd_.weights_desc());
      diff_src = memory(bd_pd_.diff_src_desc(), c.eng);
    }
  }

  float *w_, *b_, *gw_, *gb_;
  bool first_;
  typename Fwd::primitive_desc fwd_pd_;
  typename BwdWeights::primitive_desc bw_pd_;
  typename BwdData::primitive_desc bd_pd_;
  Fwd fwd_;
  BwdWeights bw_;
  BwdData bd_;
  memory b_user_, gw_user_, gb_user_, gw_prim_;
  dnnl::reorder gw_out_;
  WeightCache w_fwd_, w_bwd_;
  Converter cv_src_, cv_src_bw_, cv_dd_w_, cv_dd_d_;
};

class ConvLayer final
    : public WeightedLayer<dnnl::convolution_forward, dnnl::convolution_backward_data,
                           dnnl::convolution_backward_weights> {
 public:
  ConvLayer(const LayerSpec& s, int n, float* w, float* b, float* gw, float* gb, bool first)
      : WeightedLayer(w, b, gw, gb, first), s_(s), n_(n) {}

  memory::desc build(Ctx& c, const memory::desc&) override {
    memory::dims src = shape_of(s_.in), dstd = shape_of(s_.out);
    memory::dims wd = {s_.out.c, s_.in.c, s_.kernel, s_.kernel}, bd = {s_.out.c};
    memory::dims strides = {s_.stride, s_.stride}, pad = {s_.pad, s_.pad};
    memory::dims pad_r = {pad_right(s_.in.h, s_.out.h), pad_right(s_.in.w, s_.out.w)};
    memory::desc b_md(bd, dt::f32, tag::x);
    dnnl::convolution_forward::primitive_desc fwd_pd(
        {prop_kind::forward_training, algorithm::convolution_direct, any_desc(src), any_desc(wd),
         b_md, any_desc(dstd), strides, pad, pad_r},
        c.eng);
    dnnl::convolution_backward_weights::primitive_desc bw_pd(
        {algorithm::convolution_direct, any_desc(src), any_desc(wd), b_md, any_desc(dstd), strides,
         pad, pad_r},
        c.eng, fwd_pd);
    dnnl::convolution_backward_data::primitive_desc bd_pd;
    if (!first_)
      bd_pd = dnnl::convolution_backward_data::primitive_desc(
          {algorithm::convolution_direct, any_desc(src), any_desc(wd), any_desc(dstd), strides, pad,
           pad_r},
          c.eng, fwd_pd);
    finish(c, memory::desc(wd, dt::f32, tag::oihw), b_md, fwd_pd, bw_pd, bd_pd);
    return fwd_pd_.dst_desc();
  }

 private:
  memory::dims shape_of(const Shape& sh) const { return {n_, sh.c, sh.h, sh.w}; }
  int pad_right(int in, int out) const { return (out - 1) * s_.stride + s_.kernel - in - s_.pad; }
  LayerSpec s_;
  int n_;
};

class FcLayer final
    : public WeightedLayer<dnnl::inner_product_forward, dnnl::inner_product_backward_data,
                           dnnl::inner_product_backward_weights> {
 public:
  FcLayer(const LayerSpec& s, int n, float* w, float* b, float* gw, float* gb, bool first)
      : WeightedLayer(w, b, gw, gb, first), s_(s), n_(n) {}

  memory::desc build(Ctx& c, const memory::desc& in) override {
    // A spatial input stays 4-D so oneDNN can read the blocked layout the conv left it in; the
    // plain weights {O, C*H*W} are then the same bytes as {O, C, H, W} in oihw.
    bool spatial = in.dims().size() == 4;
    memory::dims src = spatial ? memory::dims{n_, s_.in.c, s_.in.h, s_.in.w}
                               : memory::dims{n_, s_.in.c * s_.in.h * s_.in.w};
    memory::dims wd = spatial ? memory::dims{s_.out.c, s_.in.c, s_.in.h, s_.in.w}
                              : memory::dims{s_.out.c, s_.in.c * s_.in.h * s_.in.w};
    memory::dims dstd = {n_, s_.out.c}, bd = {s_.out.c};
    memory::desc b_md(bd, dt::f32, tag::x);
    memory::desc w_plain(wd, dt::f32, spatial ? tag::oihw : tag::oi);
    // Plain weights: the gemm kernels run as fast on them, and the per-step reorders of the
    // weights and their gradient to and from a blocked layout cost 20-30% of an MLP step.
    const memory::desc& wsel = w_plain;
    dnnl::inner_product_forward::primitive_desc fwd_pd(
        {prop_kind::forward_training, any_desc(src), wsel, b_md, any_desc(dstd)}, c.eng);
    dnnl::inner_product_backward_weights::primitive_desc bw_pd(
        {any_desc(src), wsel, b_md, any_desc(dstd)}, c.eng, fwd_pd);
    dnnl::inner_product_backward_data::primitive_desc bd_pd;
    if (!first_)
      bd_pd = dnnl::inner_product_backward_data::primitive_desc(
          {any_desc(src), wsel, any_desc(dstd)}, c.eng, fwd_pd);
    finish(c, w_plain, b_md, fwd_pd, bw_pd, bd_pd);
    return fwd_pd_.dst_desc();
  }

 private:
  LayerSpec s_;
  int n_;
};

class ReluLayer final : public Layer {
 public:
  memory::desc build(Ctx& c, const memory::desc& in) override {
    fwd_pd_ = dnnl::eltwise_forward::primitive_desc(
        {prop_kind::forward_training, algorithm::eltwise_relu, in, 0.f, 0.f}, c.eng);
    bwd_pd_ = dnnl::eltwise_backward::primitive_desc({algorithm::eltwise_relu, in, in, 0.f, 0.f},
                                                     c.eng, fwd_pd_);
    fwd_ = dnnl::eltwise_forward(fwd_pd_);
    bwd_ = dnnl::eltwise_backward(bwd_pd_);
    dst = memory(fwd_pd_.dst_desc(), c.eng);
    diff_src = memory(bwd_pd_.diff_src_desc(), c.eng);
    return fwd_pd_.dst_desc();
  }
  void forward(Ctx& c, const memory& in) override {
    fwd_.execute(c.strm, {{DNNL_ARG_SRC, in}, {DNNL_ARG_DST, dst}});
  }
  void backward(Ctx& c, const memory& in, const memory& diff_dst, bool need_diff_src) override {
    if (!need_diff_src) return;
    memory dd = cv_(c, diff_dst, bwd_pd_.diff_dst_desc());
    bwd_.execute(c.strm,
                 {{DNNL_ARG_SRC, in}, {DNNL_ARG_DIFF_DST, dd}, {DNNL_ARG_DIFF_SRC, diff_src}});
  }

 private:
  dnnl::eltwise_forward::primitive_desc fwd_pd_;
  dnnl::eltwise_backward::primitive_desc bwd_pd_;
  dnnl::eltwise_forward fwd_;
  dnnl::eltwise_backward bwd_;
  Converter cv_;
};

class MaxPoolLayer final : public Layer {
 public:
  MaxPoolLayer(const LayerSpec& s, int n) : s_(s), n_(n) {}
  memory::desc build(Ctx& c, const memory::desc& in) override {
    memory::dims k = {s_.kernel, s_.kernel}, st = {s_.stride, s_.stride}, pad = {s_.pad, s_.pad};
    memory::dims pad_r = {(s_.out.h - 1) * s_.stride + s_.kernel - s_.in.h - s_.pad,
                          (s_.out.w - 1) * s_.stride + s_.kernel - s_.in.w - s_.pad};
    memory::desc out_any({n_, s_.out.c, s_.out.h, s_.out.w}, dt::f32, tag::any);
    fwd_pd_ = dnnl::pooling_forward::primitive_desc(
        {prop_kind::forward_training, algorithm::pooling_max, in, out_any, st, k, pad, pad_r},
        c.eng);
    bwd_pd_ = dnnl::pooling_backward::primitive_desc(
        {algorithm::pooling_max, in, fwd_pd_.dst_desc(), st, k, pad, pad_r}, c.eng, fwd_pd_);
    fwd_ = dnnl::pooling_forward(fwd_pd_);
    bwd_ = dnnl::pooling_backward(bwd_pd_);
    dst = memory(fwd_pd_.dst_desc(), c.eng);
    workspace_ = memory(fwd_pd_.workspace_desc(), c.eng);
    diff_src = memory(bwd_pd_.diff_src_desc(), c.eng);
    return fwd_pd_.dst_desc();
  }
  void forward(Ctx& c, const memory& in) override {
    fwd_.execute(c.strm,
                 {{DNNL_ARG_SRC, in}, {DNNL_ARG_DST, dst}, {DNNL_ARG_WORKSPACE, workspace_}});
  }
  void backward(Ctx& c, const memory&, const memory& diff_dst, bool need_diff_src) override {
    if (!need_diff_src) return;
    memory dd = cv_(c, diff_dst, bwd_pd_.diff_dst_desc());
    bwd_.execute(
        c.strm,
        {{DNNL_ARG_DIFF_DST, dd}, {DNNL_ARG_DIFF_SRC, diff_src}, {DNNL_ARG_WORKSPACE, workspace_}});
  }

 private:
  LayerSpec s_;
  int n_;
  dnnl::pooling_forward::primitive_desc fwd_pd_;
  dnnl::pooling_backward::primitive_desc bwd_pd_;
  dnnl::pooling_forward fwd_;
  dnnl::pooling_backward bwd_;
  memory workspace_;
  Converter cv_;
};

class CpuNet final : public Net {
 public:
  CpuNet(const ModelSpec& spec, int batch, std::uint64_t seed) : spec_(spec), batch_(batch) {
    if (batch < 1) throw Error("batch must be at least 1, got " + std::to_string(batch));
    for (int t = 0; t < static_cast<int>(spec_.tensors.size()); ++t) {
      params_.emplace_back(spec_.tensors[t].numel);
      grads_.emplace_back(spec_.tensors[t].numel, 0.0f);
      init_tensor(spec_, t, seed, params_.back().data());
    }
    const Shape& in = spec_.input;
    try {
      input_ = memory({{batch, in.c, in.h, in.w}, dt::f32, tag::nchw}, c_.eng);
    } catch (const dnnl::error& e) {
      throw Error(spec_.source + ": the input of a batch of " + std::to_string(batch) + " (" +
                  in.str() + ", " +
                  format_memory(std::uint64_t(batch) * std::uint64_t(in.numel()) * sizeof(float)) +
                  "): oneDNN cannot allocate it: " + e.what() + " (expected a smaller --batch)");
    }
    memory::desc cur = input_.get_desc();
    for (size_t l = 0; l < spec_.layers.size(); ++l) {
      const LayerSpec& s = spec_.layers[l];
      bool first = l == 0;
      std::unique_ptr<Layer> layer;
      switch (s.type) {
        case LayerType::kConv:
        case LayerType::kFc: {
          int wt = s.tensors[0], bt = s.tensors[1];
          float *w = params_[wt].data(), *b = params_[bt].data();
          float *gw = grads_[wt].data(), *gb = grads_[bt].data();
          if (s.type == LayerType::kConv)
            layer = std::make_unique<ConvLayer>(s, batch, w, b, gw, gb, first);
          else
            layer = std::make_unique<FcLayer>(s, batch, w, b, gw, gb, first);
          break;
        }
        case LayerType::kRelu:
          layer = std::make_unique<ReluLayer>();
          break;
        case LayerType::kMaxPool:
          layer = std::make_unique<MaxPoolLayer>(s, batch);
          break;
      }
      try {
        cur = layer->build(c_, cur);
      } catch (const dnnl::error& e) {
        throw Error(spec_.source + ": layer '" + s.name + "': oneDNN cannot build it at batch " +
                    std::to_string(batch) + ": " + e.what() +
                    (e.status == dnnl_out_of_memory
                         ? std::string(" (out of memory: expected a smaller --batch or layer)")
                         : std::string()));
      }
      layers_.push_back(std::move(layer));
    }
    logits_md_ = memory::desc({batch, spec_.classes}, dt::f32, tag::nc);
    dnnl::logsoftmax_forward::primitive_desc ls_pd({prop_kind::forward_training, logits_md_, 1},
                                                   c_.eng);
    logsoftmax_ = dnnl::logsoftmax_forward(ls_pd);
    logp_ = memory(ls_pd.dst_desc(), c_.eng);
    diff_logits_ = memory(logits_md_, c_.eng);
    labels_.assign(batch, 0);
  }

  const ModelSpec& spec() const override { return spec_; }
  int batch() const override { return batch_; }
  std::string device() const override { return "cpu"; }
  float* param(int t) override { return params_.at(t).data(); }
  const float* grad(int t) const override { return grads_.at(t).data(); }
  void params_updated(int t) override { layers_[spec_.tensors.at(t).layer]->params_updated(); }

  void set_batch(const float* images, const std::int32_t* labels, int n) override {
    if (n < 1 || n > batch_)
      throw Error("batch of " + std::to_string(n) + " samples, expected 1.." +
                  std::to_string(batch_));
    const std::int64_t per = spec_.input.numel();
    float* dst = static_cast<float*>(input_.get_data_handle());
    std::copy(images, images + per * n, dst);
    std::fill(dst + per * n, dst + per * batch_, 0.0f);
    for (int i = 0; i < batch_; ++i) labels_[i] = i < n ? labels[i] : 0;
    valid_ = n;
  }

  void forward(int l) override { layers_[l]->forward(c_, l == 0 ? input_ : layers_[l - 1]->dst); }

  LossResult compute_loss() override {
    memory logits = cv_logits_(c_, layers_.back()->dst, logits_md_);
    logsoftmax_.execute(c_.strm, {{DNNL_ARG_SRC, logits}, {DNNL_ARG_DST, logp_}});
    c_.strm.wait();
    const float* lp = static_cast<const float*>(logp_.get_data_handle());
    float* g = static_cast<float*>(diff_logits_.get_data_handle());
    const int k = spec_.classes;
    LossResult r;
    double loss = 0;
    for (int i = 0; i < batch_; ++i) {
      const float* row = lp + std::int64_t(i) * k;
      float* grow = g + std::int64_t(i) * k;
      if (i >= valid_) {
        std::fill(grow, grow + k, 0.0f);
        continue;
      }
      int y = labels_[i];
      // The data set's labels are checked against the model when it is loaded; this is the net's
      // own guard for labels from anywhere else.
      if (y < 0 || y >= k)
        throw Error("label " + std::to_string(y) + " of sample " + std::to_string(i) +
                    " in the batch is out of range 0.." + std::to_string(k - 1) + " (model '" +
                    spec_.name + "' has " + std::to_string(k) + " classes)");
      // A log-probability is at most 0; rounding in the log-softmax can leave a confident row's
      // a hair above it, which printed a loss of -0.0000.
      loss -= std::min(row[y], 0.0f);
      int best = 0;
      for (int j = 0; j < k; ++j) {
        grow[j] = (std::exp(row[j]) - (j == y ? 1.0f : 0.0f)) / float(valid_);
        if (row[j] > row[best]) best = j;
      }
      r.correct += best == y;
    }
    r.loss = float(loss / valid_);
    return r;
  }

  void read_output(int l, float* out) override { copy_plain(layers_.at(l)->dst, out); }
  void read_input_grad(int l, float* out) override {
    if (l == 0) throw Error("layer 0 has no input gradient: the first layer skips it");
    copy_plain(layers_.at(l)->diff_src, out);
  }

  void read_factors(int l, float* x, float* dy) override {
    if (spec_.layers.at(l).type != LayerType::kFc)
      throw Error("layer '" + spec_.layers[l].name +
                  "' is no fc layer: it has no sufficient factors");
    copy_plain(l == 0 ? input_ : layers_[l - 1]->dst, x);
    copy_plain(l == num_layers() - 1 ? diff_logits_ : layers_[l + 1]->diff_src, dy);
  }

  void backward(int l) override {
    const memory& diff_dst = l == num_layers() - 1 ? diff_logits_ : layers_[l + 1]->diff_src;
    layers_[l]->backward(c_, l == 0 ? input_ : layers_[l - 1]->dst, diff_dst, l > 0);
    c_.strm.wait();
  }

 private:
  // Reorders a blocked activation into plain NCHW (or NC) at out.
  void copy_plain(const memory& m, float* out) {
    const memory::dims d = m.get_desc().dims();
    memory plain({d, dt::f32, d.size() == 4 ? tag::nchw : tag::nc}, c_.eng, out);
    memory src = m;
    dnnl::reorder(src, plain).execute(c_.strm, src, plain);
    c_.strm.wait();
  }

  ModelSpec spec_;
  int batch_;
  Ctx c_;
  std::vector<std::vector<float>> params_, grads_;
  std::vector<std::unique_ptr<Layer>> layers_;
  memory input_, logp_, diff_logits_;
  memory::desc logits_md_;
  dnnl::logsoftmax_forward logsoftmax_;
  Converter cv_logits_;
  std::vector<std::int32_t> labels_;
  int valid_ = 0;
};

}  // namespace

std::unique_ptr<Net> make_cpu_net(const ModelSpec& spec, int batch, std::uint64_t seed) {
  return std::make_unique<CpuNet>(spec, batch, seed);
}

}  // namespace psbed::worker
