// Device selection: "gpu" either builds a GPU net (a usable device) or throws DeviceUnavailable
// whose one line names the reason, so the command line can exit 2 instead of crashing.
#include <catch2/catch.hpp>
#include <fstream>
#include <string>

#include "core/error.hpp"
#include "core/model_spec.hpp"
#include "worker/net.hpp"
#ifdef PSBED_HAVE_CUDA
#include "worker/gpu/cublas_api.hpp"
#endif

using namespace psbed;

TEST_CASE("the gpu device without a usable device is one DeviceUnavailable line",
          "[worker][device]") {
  const ModelSpec spec = load_model("mlp");
  const std::string why = worker::gpu_unavailable_reason();
  if (why.empty()) {
    auto net = worker::make_net("gpu", spec, 4, 1);
    CHECK(net->device() == "gpu");
    return;
  }
  CHECK(why.find('\n') == std::string::npos);
  try {
    worker::make_net("gpu", spec, 4, 1);
    FAIL("make_net(\"gpu\") built a net although: " << why);
  } catch (const DeviceUnavailable& e) {
    CHECK(std::string(e.what()) == "no CUDA device available: " + why);
  }
  CHECK_THROWS_AS(worker::require_device("gpu"), DeviceUnavailable);
}

TEST_CASE("an unknown device is a plain error naming it", "[worker][device]") {
  CHECK_NOTHROW(worker::require_device("cpu"));
  try {
    worker::require_device("tpu");
    FAIL("require_device(\"tpu\") accepted it");
  } catch (const DeviceUnavailable&) {
    FAIL("an unknown device name is a bad input, not a missing device");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("'tpu'") != std::string::npos);
  }
}

TEST_CASE("the cpu backend reads layer outputs and input gradients back in plain NCHW",
          "[worker][device]") {
  // read_output of a relu must equal max(0, read_output of the conv before it), element by
  // element: both come back in the same plain order whatever blocked layout oneDNN chose.
  const ModelSpec spec = parse_model_spec(R"(input = [3, 5, 5]
classes = 3
[[layer]]
type = "conv"
out_channels = 16
kernel = 3
pad = 1
[[layer]]
type = "relu"
[[layer]]
type = "fc"
out = 3
)",
                                          "test");
  auto net = worker::make_cpu_net(spec, 2, 1);
  std::vector<float> x(std::size_t(spec.input.numel()) * 2);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 7 % 13) - 6) / 6.0f;
  std::vector<std::int32_t> y = {0, 2};
  net->set_batch(x.data(), y.data(), 2);
  net->forward_all();
  net->compute_loss();
  net->backward_all();
  const std::size_t n = std::size_t(spec.layers[0].out.numel()) * 2;
  std::vector<float> conv(n), relu(n), drelu_in(n), dfc_in(n);
  net->read_output(0, conv.data());
  net->read_output(1, relu.data());
  net->read_input_grad(1, drelu_in.data());
  net->read_input_grad(2, dfc_in.data());
  int positive = 0;
  for (std::size_t i = 0; i < n; ++i) {
    CHECK(relu[i] == Approx(conv[i] > 0 ? conv[i] : 0.0f));
    CHECK(drelu_in[i] == Approx(conv[i] > 0 ? dfc_in[i] : 0.0f));
    positive += conv[i] > 0;
  }
  CHECK(positive > 0);
  CHECK_THROWS_AS(net->read_input_grad(0, drelu_in.data()), Error);
}

#ifdef PSBED_HAVE_CUDA
// cuBLAS is opened by name when the GPU backend first needs it (tests/integration/
// lazy_gpu_libs.sh checks that a CPU-only process never maps it): the library this build found
// must load, with every function the backend calls, whether or not a device is present.
TEST_CASE("cuBLAS loads on first use with every function the GPU backend calls",
          "[worker][device]") {
  INFO("looked for: " << worker::gpu::cublas_library());
  REQUIRE(worker::gpu::cublas_unavailable_reason() == "");
  const worker::gpu::CublasApi& api = worker::gpu::cublas();
  CHECK(api.create != nullptr);
  CHECK(api.destroy != nullptr);
  CHECK(api.set_stream != nullptr);
  CHECK(api.set_math_mode != nullptr);
  CHECK(api.sgemm != nullptr);
  REQUIRE(api.status_string != nullptr);
  // A call that needs no device: the library is the real one, not just a file of that name.
  CHECK(std::string(api.status_string(CUBLAS_STATUS_NOT_INITIALIZED)).size() > 0);
  // What is missing is named: the library (the loader's words for both names tried), or the
  // function, where a library of that name lacks it.
  worker::gpu::CublasApi none;
  const std::string missing =
      worker::gpu::load_cublas("libpsbed-nope.so.1", "/nonexistent/libpsbed-nope.so", none);
  CHECK(missing.find("cannot load cuBLAS") == 0);
  CHECK(missing.find("libpsbed-nope.so.1") != std::string::npos);
  CHECK(missing.find("/nonexistent/libpsbed-nope.so") != std::string::npos);
  CHECK(missing.find('\n') == std::string::npos);
  const std::string wrong = worker::gpu::load_cublas("libm.so.6", "", none);
  CHECK(wrong == "symbol cublasCreate_v2 not found in libm.so.6");
  std::ifstream maps("/proc/self/maps");
  const std::string text((std::istreambuf_iterator<char>(maps)), std::istreambuf_iterator<char>());
  CHECK(text.find("libcublas") != std::string::npos);
}
#endif
