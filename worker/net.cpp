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

void Net::sgd_step(const SgdOptions& opt, std::vector<std::vector<float>>& velocity) {
  for (int t = 0; t < static_cast<int>(spec().tensors.size()); ++t) {
    sgd_apply(opt, param(t), grad(t), velocity.at(t).data(), spec().tensors[t].numel);
    params_updated(t);
  }
}

void Net::read_output(int, float*) {
  throw Error("the " + device() + " backend keeps no layer outputs to read back");
}

void Net::read_input_grad(int, float*) {
  throw Error("the " + device() + " backend keeps no input gradients to read back");
}

void Net::read_factors(int, float*, float*) {
  throw Error("the " + device() +
              " backend cannot read sufficient factors: --comm sfb and hybrid "
              "need the cpu device (or compute replay)");
}

#ifndef PSBED_HAVE_CUDA
std::string gpu_unavailable_reason() {
  return "this psbed was built without CUDA (PSBED_CUDA=OFF or no nvcc at configure time)";
}
std::unique_ptr<Net> make_gpu_net(const ModelSpec&, int, std::uint64_t) {
  throw DeviceUnavailable("no CUDA device available: " + gpu_unavailable_reason());
}
#else
std::unique_ptr<Net> make_gpu_net(const ModelSpec& spec, int batch, std::uint64_t seed);
#endif

void require_device(const std::string& device) {
  if (device == "cpu") return;
  if (device != "gpu") throw Error("unknown device '" + device + "', expected cpu or gpu");
  if (std::string why = gpu_unavailable_reason(); !why.empty())
    throw DeviceUnavailable("no CUDA device available: " + why);
}

std::unique_ptr<Net> make_net(const std::string& device, const ModelSpec& spec, int batch,
                              std::uint64_t seed) {
  require_device(device);
  if (device == "cpu") return make_cpu_net(spec, batch, seed);
  return make_gpu_net(spec, batch, seed);
}

}  // namespace psbed::worker
