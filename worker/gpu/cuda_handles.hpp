// Owning handles for the CUDA runtime and cuBLAS objects of the GPU backend, and the checks that
// turn their status codes into psbed::Error with the call that failed and the runtime's words.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <string>

#include "core/error.hpp"
#include "worker/gpu/cublas_api.hpp"

namespace psbed::worker::gpu {

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw Error(std::string("CUDA: ") + what + " failed: " + cudaGetErrorString(e));
}

inline void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string("cuBLAS: ") + what + " failed: " + cublas().status_string(s));
}

struct DeviceFree {
  void operator()(void* p) const { cudaFree(p); }
};
struct PinnedFree {
  void operator()(void* p) const { cudaFreeHost(p); }
};
struct StreamDestroy {
  void operator()(cudaStream_t s) const { cudaStreamDestroy(s); }
};
struct EventDestroy {
  void operator()(cudaEvent_t e) const { cudaEventDestroy(e); }
};
struct CublasDestroy {
  void operator()(cublasHandle_t h) const { cublas().destroy(h); }
};

template <class T>
using DeviceArray = std::unique_ptr<T[], DeviceFree>;
// Page-locked host memory: the only kind a copy engine moves without a staging copy, and the
// kind cudaMemcpyAsync needs to be asynchronous at all.
template <class T>
using PinnedArray = std::unique_ptr<T[], PinnedFree>;
using Stream = std::unique_ptr<CUstream_st, StreamDestroy>;
using Event = std::unique_ptr<CUevent_st, EventDestroy>;
using Cublas = std::unique_ptr<cublasContext, CublasDestroy>;

template <class T>
DeviceArray<T> device_array(std::size_t n) {
  void* p = nullptr;
  check(cudaMalloc(&p, (n ? n : 1) * sizeof(T)),
        ("cudaMalloc of " + std::to_string(n * sizeof(T)) + " bytes").c_str());
  check(cudaMemset(p, 0, (n ? n : 1) * sizeof(T)), "cudaMemset");
  // cudaMemset may still be running on the legacy stream, which the backend's non-blocking
  // streams do not wait for: finish it here, once per allocation.
  check(cudaDeviceSynchronize(), "cudaMemset");
  return DeviceArray<T>(static_cast<T*>(p));
}

template <class T>
PinnedArray<T> pinned_array(std::size_t n) {
  void* p = nullptr;
  check(cudaMallocHost(&p, (n ? n : 1) * sizeof(T)),
        ("cudaMallocHost of " + std::to_string(n * sizeof(T)) + " bytes").c_str());
  return PinnedArray<T>(static_cast<T*>(p));
}

inline Stream make_stream() {
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  return Stream(s);
}

inline Event make_event() {
  cudaEvent_t e = nullptr;
  check(cudaEventCreate(&e), "cudaEventCreate");
  return Event(e);
}

inline Cublas make_cublas() {
  cublasHandle_t h = nullptr;
  check(cublas().create(&h), "cublasCreate");
  return Cublas(h);
}

}  // namespace psbed::worker::gpu
