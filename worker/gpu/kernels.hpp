// The small CUDA kernels of the GPU backend, behind plain launch functions so that gpu_net.cpp
// stays ordinary C++ built by the host compiler. Every tensor is a contiguous float array in
// NCHW order (the order the CPU backend's plain layouts and the wire use); every launch goes to
// the given stream and returns at once.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace psbed::worker::gpu {

// Convolution geometry for one batch: input n x c x h x w, output n x oc x oh x ow.
struct ConvGeom {
  int n, c, h, w, k, stride, pad, oh, ow;
  std::int64_t col_rows() const { return std::int64_t(c) * k * k; }  // host side only
  std::int64_t col_cols() const { return std::int64_t(n) * oh * ow; }
};

// col[(ci*k + kh)*k + kw][ni*oh*ow + y*ow + x] = in[ni][ci][y*stride - pad + kh][x*stride - pad +
// kw], zero outside the input: one GEMM then covers the whole batch.
void im2col(const ConvGeom& g, const float* in, float* col, cudaStream_t s);
// The adjoint of im2col: every input element gathers the column entries it was copied to.
void col2im(const ConvGeom& g, const float* col, float* in, cudaStream_t s);

// The GEMM of a convolution yields channel-major [oc][n*p]; the network wants [n][oc][p].
void cm_to_nchw_bias(const float* cm, const float* bias, float* out, int n, int oc, int p,
                     cudaStream_t s);
void nchw_to_cm(const float* in, float* cm, int n, int oc, int p, cudaStream_t s);

void add_bias_rows(float* y, const float* bias, int rows, int cols, cudaStream_t s);
void sum_rows(const float* m, float* out, int rows, int cols, cudaStream_t s);  // out[r] = sum_c
void sum_cols(const float* m, float* out, int rows, int cols, cudaStream_t s);  // out[c] = sum_r

void relu_forward(const float* x, float* y, std::int64_t n, cudaStream_t s);
// dx = dy where x > 0, else 0 (the CPU backend's rule, zero at x == 0).
void relu_backward(const float* x, const float* dy, float* dx, std::int64_t n, cudaStream_t s);

// Max pooling over k x k windows; padded positions never win. argmax holds the winning input
// index within its plane (-1 for a window with no input), first maximum in scan order.
struct PoolGeom {
  int n, c, h, w, k, stride, pad, oh, ow;
};
void maxpool_forward(const PoolGeom& g, const float* x, float* y, int* argmax, cudaStream_t s);
void maxpool_backward(const PoolGeom& g, const float* dy, const int* argmax, float* dx,
                      cudaStream_t s);

// Log-softmax and cross-entropy per sample of logits [n][k]: nll[i] = -log p(label_i),
// correct[i] = (first arg-max == label_i), grad row i = (softmax - onehot) / valid for i < valid
// and zero for padding rows, as the CPU backend defines the loss.
void softmax_xent(const float* logits, const std::int32_t* labels, int n, int k, int valid,
                  float* nll, int* correct, float* grad, cudaStream_t s);

// v = momentum * v + (g + weight_decay * w); w -= lr * v (core/optimizer's sgd_apply).
void sgd(float* w, const float* g, float* v, std::int64_t n, float lr, float momentum,
         float weight_decay, cudaStream_t s);

}  // namespace psbed::worker::gpu
