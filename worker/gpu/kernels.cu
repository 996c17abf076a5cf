#include <cfloat>

#include "worker/gpu/kernels.hpp"

namespace psbed::worker::gpu {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(std::int64_t n) {
  const std::int64_t b = (n + kThreads - 1) / kThreads;
  // A grid-stride loop covers what a capped grid leaves over.
  return static_cast<unsigned>(b < 65535 ? (b > 0 ? b : 1) : 65535);
}

#define GRID_STRIDE(i, n)                                                             \
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < (n); \
       i += std::int64_t(blockDim.x) * gridDim.x)

__global__ void im2col_kernel(ConvGeom g, const float* __restrict__ in, float* __restrict__ col) {
  const std::int64_t p = std::int64_t(g.oh) * g.ow, cols = g.n * p;
  const std::int64_t total = std::int64_t(g.c) * g.k * g.k * cols;
  GRID_STRIDE(i, total) {
    const std::int64_t row = i / cols, j = i % cols;
    const int kw = int(row % g.k), kh = int(row / g.k % g.k), ci = int(row / (g.k * g.k));
    const int ni = int(j / p), y = int(j % p / g.ow), x = int(j % g.ow);
    const int iy = y * g.stride - g.pad + kh, ix = x * g.stride - g.pad + kw;
    col[i] = (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w)
                 ? in[((std::int64_t(ni) * g.c + ci) * g.h + iy) * g.w + ix]
                 : 0.0f;
  }
}

__global__ void col2im_kernel(ConvGeom g, const float* __restrict__ col, float* __restrict__ in) {
  const std::int64_t p = std::int64_t(g.oh) * g.ow, cols = g.n * p;
  const std::int64_t total = std::int64_t(g.n) * g.c * g.h * g.w;
  GRID_STRIDE(i, total) {
    const int ix = int(i % g.w), iy = int(i / g.w % g.h), ci = int(i / (g.w * g.h) % g.c);
    const int ni = int(i / (std::int64_t(g.w) * g.h * g.c));
    float sum = 0.0f;
    for (int kh = 0; kh < g.k; ++kh) {
      const int ty = iy + g.pad - kh;
      if (ty < 0 || ty % g.stride != 0 || ty / g.stride >= g.oh) continue;
      for (int kw = 0; kw < g.k; ++kw) {
        const int tx = ix + g.pad - kw;
        if (tx < 0 || tx % g.stride != 0 || tx / g.stride >= g.ow) continue;
        const std::int64_t row = (std::int64_t(ci) * g.k + kh) * g.k + kw;
        sum += col[row * cols + ni * p + (ty / g.stride) * g.ow + tx / g.stride];
      }
    }
    in[i] = sum;
  }
}

__global__ void cm_to_nchw_bias_kernel(const float* __restrict__ cm, const float* __restrict__ bias,
                                       float* __restrict__ out, int n, int oc, int p) {
  const std::int64_t total = std::int64_t(n) * oc * p;
  GRID_STRIDE(i, total) {
    const int q = int(i % p), o = int(i / p % oc), ni = int(i / (std::int64_t(p) * oc));
    out[i] = cm[(std::int64_t(o) * n + ni) * p + q] + bias[o];
  }
}

__global__ void nchw_to_cm_kernel(const float* __restrict__ in, float* __restrict__ cm, int n,
                                  int oc, int p) {
  const std::int64_t total = std::int64_t(n) * oc * p;
  GRID_STRIDE(i, total) {
    const int q = int(i % p), o = int(i / p % oc), ni = int(i / (std::int64_t(p) * oc));
    cm[(std::int64_t(o) * n + ni) * p + q] = in[i];
  }
}

__global__ void add_bias_rows_kernel(float* y, const float* __restrict__ bias, int rows, int cols) {
  GRID_STRIDE(i, std::int64_t(rows) * cols) { y[i] += bias[i % cols]; }
}

// One block a row: a tree reduction in shared memory.
__global__ void sum_rows_kernel(const float* __restrict__ m, float* __restrict__ out, int cols) {
  __shared__ float part[kThreads];
  const float* row = m + std::int64_t(blockIdx.x) * cols;
  float s = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += row[c];
  part[threadIdx.x] = s;
  __syncthreads();
  for (int h = blockDim.x / 2; h > 0; h /= 2) {
    if (threadIdx.x < h) part[threadIdx.x] += part[threadIdx.x + h];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = part[0];
}

__global__ void sum_cols_kernel(const float* __restrict__ m, float* __restrict__ out, int rows,
                                int cols) {
  GRID_STRIDE(c, cols) {
    float s = 0.0f;
    for (int r = 0; r < rows; ++r) s += m[std::int64_t(r) * cols + c];
    out[c] = s;
  }
}

__global__ void relu_forward_kernel(const float* __restrict__ x, float* __restrict__ y,
                                    std::int64_t n) {
  GRID_STRIDE(i, n) { y[i] = x[i] > 0.0f ? x[i] : 0.0f; }
}

__global__ void relu_backward_kernel(const float* __restrict__ x, const float* __restrict__ dy,
                                     float* __restrict__ dx, std::int64_t n) {
  GRID_STRIDE(i, n) { dx[i] = x[i] > 0.0f ? dy[i] : 0.0f; }
}

__global__ void maxpool_forward_kernel(PoolGeom g, const float* __restrict__ x,
                                       float* __restrict__ y, int* __restrict__ argmax) {
  const std::int64_t total = std::int64_t(g.n) * g.c * g.oh * g.ow;
  GRID_STRIDE(i, total) {
    const int ox = int(i % g.ow), oy = int(i / g.ow % g.oh);
    const std::int64_t plane = i / (std::int64_t(g.ow) * g.oh);
    const float* xp = x + plane * g.h * g.w;
    float best = -FLT_MAX;
    int arg = -1;
    for (int kh = 0; kh < g.k; ++kh) {
      const int iy = oy * g.stride - g.pad + kh;
      if (iy < 0 || iy >= g.h) continue;
      for (int kw = 0; kw < g.k; ++kw) {
        const int ix = ox * g.stride - g.pad + kw;
        if (ix < 0 || ix >= g.w) continue;
        const float v = xp[iy * g.w + ix];
        if (arg < 0 || v > best) best = v, arg = iy * g.w + ix;
      }
    }
    y[i] = arg < 0 ? 0.0f : best;
    argmax[i] = arg;
  }
}

// Gathers rather than scatters: overlapping windows (stride < kernel) then need no atomics and
// the sum is deterministic.
__global__ void maxpool_backward_kernel(PoolGeom g, const float* __restrict__ dy,
                                        const int* __restrict__ argmax, float* __restrict__ dx) {
  const std::int64_t total = std::int64_t(g.n) * g.c * g.h * g.w;
  GRID_STRIDE(i, total) {
    const int ix = int(i % g.w), iy = int(i / g.w % g.h);
    const std::int64_t plane = i / (std::int64_t(g.w) * g.h);
    const int self = iy * g.w + ix;
    float sum = 0.0f;
    for (int kh = 0; kh < g.k; ++kh) {
      const int ty = iy + g.pad - kh;
      if (ty < 0 || ty % g.stride != 0 || ty / g.stride >= g.oh) continue;
      for (int kw = 0; kw < g.k; ++kw) {
        const int tx = ix + g.pad - kw;
        if (tx < 0 || tx % g.stride != 0 || tx / g.stride >= g.ow) continue;
        const std::int64_t o = (plane * g.oh + ty / g.stride) * g.ow + tx / g.stride;
        if (argmax[o] == self) sum += dy[o];
      }
    }
    dx[i] = sum;
  }
}

// One thread a sample: the class count of these models is small (10).
__global__ void softmax_xent_kernel(const float* __restrict__ logits,
                                    const std::int32_t* __restrict__ labels, int n, int k,
                                    int valid, float* __restrict__ nll, int* __restrict__ correct,
                                    float* __restrict__ grad) {
  GRID_STRIDE(i, n) {
    const float* row = logits + i * k;
    float* grow = grad + i * k;
    if (i >= valid) {
      for (int j = 0; j < k; ++j) grow[j] = 0.0f;
      nll[i] = 0.0f;
      correct[i] = 0;
      continue;
    }
    float mx = row[0];
    int best = 0;
    for (int j = 1; j < k; ++j)
      if (row[j] > mx) mx = row[j], best = j;
    float sum = 0.0f;
    for (int j = 0; j < k; ++j) sum += expf(row[j] - mx);
    const float lse = mx + logf(sum);
    const int y = labels[i];
    for (int j = 0; j < k; ++j)
      grow[j] = (expf(row[j] - lse) - (j == y ? 1.0f : 0.0f)) / float(valid);
    nll[i] = fmaxf(lse - row[y], 0.0f);  // a log-probability is at most 0, whatever the rounding
    correct[i] = best == y;
  }
}

__global__ void sgd_kernel(float* __restrict__ w, const float* __restrict__ g,
                           float* __restrict__ v, std::int64_t n, float lr, float mu, float wd) {
  GRID_STRIDE(i, n) {
    if (mu == 0.0f) {
      w[i] -= lr * (g[i] + wd * w[i]);
    } else {
      const float vi = mu * v[i] + g[i] + wd * w[i];
      v[i] = vi;
      w[i] -= lr * vi;
    }
  }
}

}  // namespace

void im2col(const ConvGeom& g, const float* in, float* col, cudaStream_t s) {
  im2col_kernel<<<blocks_for(g.col_rows() * g.col_cols()), kThreads, 0, s>>>(g, in, col);
}

void col2im(const ConvGeom& g, const float* col, float* in, cudaStream_t s) {
  col2im_kernel<<<blocks_for(std::int64_t(g.n) * g.c * g.h * g.w), kThreads, 0, s>>>(g, col, in);
}

void cm_to_nchw_bias(const float* cm, const float* bias, float* out, int n, int oc, int p,
                     cudaStream_t s) {
  cm_to_nchw_bias_kernel<<<blocks_for(std::int64_t(n) * oc * p), kThreads, 0, s>>>(cm, bias, out, n,
                                                                                   oc, p);
}

void nchw_to_cm(const float* in, float* cm, int n, int oc, int p, cudaStream_t s) {
  nchw_to_cm_kernel<<<blocks_for(std::int64_t(n) * oc * p), kThreads, 0, s>>>(in, cm, n, oc, p);
}

void add_bias_rows(float* y, const float* bias, int rows, int cols, cudaStream_t s) {
  add_bias_rows_kernel<<<blocks_for(std::int64_t(rows) * cols), kThreads, 0, s>>>(y, bias, rows,
                                                                                  cols);
}

void sum_rows(const float* m, float* out, int rows, int cols, cudaStream_t s) {
  sum_rows_kernel<<<rows, kThreads, 0, s>>>(m, out, cols);
}

void sum_cols(const float* m, float* out, int rows, int cols, cudaStream_t s) {
  sum_cols_kernel<<<blocks_for(cols), kThreads, 0, s>>>(m, out, rows, cols);
}

void relu_forward(const float* x, float* y, std::int64_t n, cudaStream_t s) {
  relu_forward_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, y, n);
}

void relu_backward(const float* x, const float* dy, float* dx, std::int64_t n, cudaStream_t s) {
  relu_backward_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, dy, dx, n);
}

void maxpool_forward(const PoolGeom& g, const float* x, float* y, int* argmax, cudaStream_t s) {
  maxpool_forward_kernel<<<blocks_for(std::int64_t(g.n) * g.c * g.oh * g.ow), kThreads, 0, s>>>(
      g, x, y, argmax);
}

void maxpool_backward(const PoolGeom& g, const float* dy, const int* argmax, float* dx,
                      cudaStream_t s) {
  maxpool_backward_kernel<<<blocks_for(std::int64_t(g.n) * g.c * g.h * g.w), kThreads, 0, s>>>(
      g, dy, argmax, dx);
}

void softmax_xent(const float* logits, const std::int32_t* labels, int n, int k, int valid,
                  float* nll, int* correct, float* grad, cudaStream_t s) {
  softmax_xent_kernel<<<blocks_for(n), kThreads, 0, s>>>(logits, labels, n, k, valid, nll, correct,
                                                         grad);
}

void sgd(float* w, const float* g, float* v, std::int64_t n, float lr, float momentum,
         float weight_decay, cudaStream_t s) {
  sgd_kernel<<<blocks_for(n), kThreads, 0, s>>>(w, g, v, n, lr, momentum, weight_decay);
}

}  // namespace psbed::worker::gpu
