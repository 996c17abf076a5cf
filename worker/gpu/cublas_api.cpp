#include "worker/gpu/cublas_api.hpp"

#include <dlfcn.h>

#include <mutex>

#include "core/error.hpp"

namespace psbed::worker::gpu {
namespace {

template <class F>
bool find(void* lib, const char* name, const std::string& where, F& out, std::string& error) {
  out = reinterpret_cast<F>(dlsym(lib, name));
  if (!out) error = std::string("symbol ") + name + " not found in " + where;
  return out != nullptr;
}

struct Loaded {
  CublasApi api;
  std::string error;
};

const Loaded& loaded() {
  static Loaded l;
  static std::once_flag once;
  std::call_once(once,
                 [] { l.error = load_cublas(PSBED_CUBLAS_SONAME, PSBED_CUBLAS_PATH, l.api); });
  return l;
}

}  // namespace

std::string load_cublas(const std::string& soname, const std::string& path, CublasApi& api) {
  // Never closed: handles and the functions stay in use until the process ends.
  void* lib = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  std::string where = soname;
  if (!lib) {
    const std::string first = dlerror();
    lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) return "cannot load cuBLAS: " + first + "; " + dlerror();
    where = path;
  }
  std::string error;
  find(lib, "cublasCreate_v2", where, api.create, error) &&
      find(lib, "cublasDestroy_v2", where, api.destroy, error) &&
      find(lib, "cublasSetStream_v2", where, api.set_stream, error) &&
      find(lib, "cublasSetMathMode", where, api.set_math_mode, error) &&
      find(lib, "cublasSgemm_v2", where, api.sgemm, error) &&
      find(lib, "cublasGetStatusString", where, api.status_string, error);
  return error;
}

std::string cublas_library() {
  return std::string(PSBED_CUBLAS_SONAME) + ", else " + PSBED_CUBLAS_PATH;
}

std::string cublas_unavailable_reason() { return loaded().error; }

const CublasApi& cublas() {
  const Loaded& l = loaded();
  if (!l.error.empty()) throw DeviceUnavailable("no usable cuBLAS: " + l.error);
  return l.api;
}

}  // namespace psbed::worker::gpu
