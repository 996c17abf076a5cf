// cuBLAS, loaded when the GPU backend first needs it rather than linked. Linked, cuBLAS and
// cuBLASLt are mapped and relocated into every psbed process at start, GPU or not: about
// 215 MiB of resident memory and 0.1 s per process (coordinator, shards, CPU workers, the
// predictor). The backend uses six of its functions; they are looked up once, by name.
#pragma once
#include <cublas_v2.h>

#include <string>

namespace psbed::worker::gpu {

struct CublasApi {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasSgemm_v2) sgemm = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
};

// Opens the library by `soname` (the loader's search path: RUNPATH, ld.so.cache), else at
// `path`, and looks the functions up into `api`. Returns "" or why not, naming what was tried:
// "cannot load cuBLAS: <the loader's words for each>" or "symbol X not found in <library>".
std::string load_cublas(const std::string& soname, const std::string& path, CublasApi& api);

// What this build looks for: the soname of its CUDA major version, else the file it found.
std::string cublas_library();

// Why cuBLAS cannot be used ("" if it can): the library's name and the loader's words. Loads it
// on the first call, once for the process.
std::string cublas_unavailable_reason();

// The loaded functions; throws DeviceUnavailable with cublas_unavailable_reason() if the library
// or one of the functions is missing.
const CublasApi& cublas();

}  // namespace psbed::worker::gpu
