#include "worker/net.hpp"

#include "core/error.hpp"

namespace psbed::worker {

void Net::all_params_updated() {
  for (int t = 0; t < static_cast<int>(spec().tensors.size()); ++t) params_updated(t);
}

void Net::forward_all() {
  for (int l = 0; l < num_layers(); ++l) forward(l);
}

void Net::backward_all() {
  for (int l = num_layers() - 1; l >= 0; --l) backward(l);
}

#ifndef PSBED_HAVE_CUDA
std::unique_ptr<Net> make_gpu_net(const ModelSpec&, int, std::uint64_t) {
  throw Error("no CUDA device available: this psbed was built without CUDA (PSBED_CUDA=OFF or no nvcc)");
}
#else
std::unique_ptr<Net> make_gpu_net(const ModelSpec& spec, int batch, std::uint64_t seed);
#endif

std::unique_ptr<Net> make_net(const std::string& device, const ModelSpec& spec, int batch,
                              std::uint64_t seed) {
  if (device == "cpu") return make_cpu_net(spec, batch, seed);
  if (device == "gpu") return make_gpu_net(spec, batch, seed);
  throw Error("unknown device '" + device + "', expected cpu or gpu");
}

}  // namespace psbed::worker
