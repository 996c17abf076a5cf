// A model as data: the sequential layer list of a workloads/models/*.toml file, with every shape
// inferred and checked, and the parameter tensors it owns. The live worker builds its network
// from this; the predictor reads the same tensor list, so both agree on names and sizes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace psbed {

enum class LayerType { kConv, kFc, kRelu, kMaxPool };
const char* to_string(LayerType t);

// Per-sample shape, NCHW without the N. A fully-connected output is {features, 1, 1}.
struct Shape {
  int c = 0, h = 0, w = 0;
  std::int64_t numel() const { return std::int64_t(c) * h * w; }
  std::string str() const;
};

struct LayerSpec {
  std::string name;  // unique in the model: "conv1", "fc2", "relu3" ...
  LayerType type = LayerType::kRelu;
  int out_channels = 0;                 // conv: output channels; fc: output features
  int kernel = 0, stride = 1, pad = 0;  // conv and maxpool
  Shape in, out;
  // Parameter tensors of this layer (indices into ModelSpec::tensors), empty for relu/maxpool.
  std::vector<int> tensors;
};

struct TensorSpec {
  std::string name;                // "conv1.weight", "conv1.bias"
  int layer = 0;                   // index into ModelSpec::layers; lower = nearer the input
  std::vector<std::int64_t> dims;  // weight: conv {O,I,KH,KW}, fc {O,I}; bias {O}
  std::int64_t numel = 0;
  std::int64_t bytes() const { return numel * 4; }
};

struct ModelSpec {
  std::string name;
  std::string source;  // file it came from
  Shape input;
  int classes = 0;
  std::vector<LayerSpec> layers;
  std::vector<TensorSpec> tensors;

  std::int64_t parameter_count() const;
  std::int64_t parameter_bytes() const { return parameter_count() * 4; }
};

// Parses and checks a spec; errors name the source and the layer.
ModelSpec parse_model_spec(const std::string& toml_text, const std::string& source);
ModelSpec load_model_spec_file(const std::string& path);
// "lenet5" -> <models dir>/lenet5.toml; anything with a '/' or ending in ".toml" is a path.
// The models dir is $PSBED_MODELS_DIR if set, else the one shipped with the source tree.
ModelSpec load_model(const std::string& name_or_path);
std::string models_dir();
std::vector<std::string> shipped_model_names();

}  // namespace psbed
