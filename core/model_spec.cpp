#include "core/model_spec.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string_view>
#include <toml++/toml.h>

#include "core/error.hpp"

#ifndef PSBED_MODELS_DIR
#define PSBED_MODELS_DIR "workloads/models"
#endif

namespace psbed {
namespace fs = std::filesystem;

const char* to_string(LayerType t) {
  switch (t) {
    case LayerType::kConv: return "conv";
    case LayerType::kFc: return "fc";
    case LayerType::kRelu: return "relu";
    case LayerType::kMaxPool: return "maxpool";
  }
  return "?";
}

std::string Shape::str() const {
  return std::to_string(c) + "x" + std::to_string(h) + "x" + std::to_string(w);
}

std::int64_t ModelSpec::parameter_count() const {
  std::int64_t n = 0;
  for (const auto& t : tensors) n += t.numel;
  return n;
}

namespace {

struct LayerContext {
  const std::string& source;
  int index;
  std::string name;
  [[noreturn]] void fail(const std::string& msg) const {
    throw Error(source + ": layer #" + std::to_string(index + 1) +
                (name.empty() ? "" : " '" + name + "'") + ": " + msg);
  }
};

int get_int(const toml::table& t, const char* key, const LayerContext& ctx, int dflt, bool required) {
  const toml::node* n = t.get(key);
  if (!n) {
    if (required) ctx.fail(std::string("missing '") + key + "'");
    return dflt;
  }
  auto v = n->value<std::int64_t>();
  if (!v || *v < 0 || *v > (1 << 24)) ctx.fail(std::string("'") + key + "' must be a non-negative integer");
  return static_cast<int>(*v);
}

std::vector<int> get_shape(const toml::table& root, const std::string& source) {
  const toml::array* a = root["input"].as_array();
  if (!a || a->size() != 3)
    throw Error(source + ": 'input' must be an array of 3 integers [channels, height, width]");
  std::vector<int> out;
  for (const auto& e : *a) {
    auto v = e.value<std::int64_t>();
    if (!v || *v <= 0) throw Error(source + ": 'input' entries must be positive integers");
    out.push_back(static_cast<int>(*v));
  }
  return out;
}

}  // namespace

ModelSpec parse_model_spec(const std::string& toml_text, const std::string& source) {
  toml::table root;
  try {
    root = toml::parse(toml_text, source);
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << source << ":" << e.source().begin.line << ": " << e.description();
    throw Error(os.str());
  }
  ModelSpec m;
  m.source = source;
  m.name = root["name"].value_or(fs::path(source).stem().string());
  auto in = get_shape(root, source);
  m.input = {in[0], in[1], in[2]};
  m.classes = static_cast<int>(root["classes"].value_or<std::int64_t>(10));
  if (m.classes < 2) throw Error(source + ": 'classes' must be at least 2");

  const toml::array* layers = root["layer"].as_array();
  if (!layers || layers->empty())
    throw Error(source + ": no layers: expected [[layer]] tables with a 'type'");

  std::map<std::string, int> type_counts;
  Shape cur = m.input;
  for (size_t i = 0; i < layers->size(); ++i) {
    const toml::table* t = (*layers)[i].as_table();
    LayerContext ctx{source, static_cast<int>(i), ""};
    if (!t) ctx.fail("expected a table");
    std::string type = (*t)["type"].value_or(std::string());
    LayerSpec L;
    if (type == "conv") L.type = LayerType::kConv;
    else if (type == "fc" || type == "linear") L.type = LayerType::kFc;
    else if (type == "relu") L.type = LayerType::kRelu;
    else if (type == "maxpool") L.type = LayerType::kMaxPool;
    else ctx.fail("unknown type '" + type + "', expected conv, fc, relu or maxpool");
    const char* tname = to_string(L.type);
    L.name = (*t)["name"].value_or(std::string(tname) + std::to_string(++type_counts[tname]));
    ctx.name = L.name;
    for (const auto& other : m.layers)
      if (other.name == L.name) ctx.fail("duplicate layer name");
    for (const auto& entry : *t) {
      // Not a structured binding: C++17 lambdas cannot capture one (clang rejects it).
      const std::string_view key = entry.first.str();
      static const char* known[] = {"type", "name", "in_channels", "out_channels", "kernel",
                                    "stride", "pad", "in", "out"};
      if (std::none_of(std::begin(known), std::end(known), [&](const char* k) { return key == k; }))
        ctx.fail("unknown key '" + std::string(key) + "'");
    }
    L.in = cur;
    switch (L.type) {
      case LayerType::kConv: {
        int declared_in = get_int(*t, "in_channels", ctx, cur.c, false);
        if (declared_in != cur.c)
          ctx.fail("in_channels = " + std::to_string(declared_in) + " but its input is " + cur.str());
        L.out_channels = get_int(*t, "out_channels", ctx, 0, true);
        L.kernel = get_int(*t, "kernel", ctx, 0, true);
        L.stride = get_int(*t, "stride", ctx, 1, false);
        L.pad = get_int(*t, "pad", ctx, 0, false);
        if (L.out_channels < 1 || L.kernel < 1 || L.stride < 1)
          ctx.fail("out_channels, kernel and stride must be positive");
        int oh = (cur.h + 2 * L.pad - L.kernel) / L.stride + 1;
        int ow = (cur.w + 2 * L.pad - L.kernel) / L.stride + 1;
        if (cur.h + 2 * L.pad < L.kernel || cur.w + 2 * L.pad < L.kernel)
          ctx.fail("kernel " + std::to_string(L.kernel) + " does not fit its input " + cur.str());
        L.out = {L.out_channels, oh, ow};
        break;
      }
      case LayerType::kFc: {
        int declared_in = get_int(*t, "in", ctx, static_cast<int>(cur.numel()), false);
        if (declared_in != cur.numel())
          ctx.fail("in = " + std::to_string(declared_in) + " but its input " + cur.str() + " has " +
                   std::to_string(cur.numel()) + " features");
        L.out_channels = get_int(*t, "out", ctx, 0, true);
        if (L.out_channels < 1) ctx.fail("'out' must be positive");
        L.out = {L.out_channels, 1, 1};
        break;
      }
      case LayerType::kRelu:
        L.out = cur;
        break;
      case LayerType::kMaxPool: {
        L.kernel = get_int(*t, "kernel", ctx, 2, false);
        L.stride = get_int(*t, "stride", ctx, L.kernel, false);
        L.pad = get_int(*t, "pad", ctx, 0, false);
        if (L.kernel < 1 || L.stride < 1) ctx.fail("kernel and stride must be positive");
        if (cur.h + 2 * L.pad < L.kernel || cur.w + 2 * L.pad < L.kernel)
          ctx.fail("kernel " + std::to_string(L.kernel) + " does not fit its input " + cur.str());
        L.out = {cur.c, (cur.h + 2 * L.pad - L.kernel) / L.stride + 1,
                 (cur.w + 2 * L.pad - L.kernel) / L.stride + 1};
        break;
      }
    }
    int li = static_cast<int>(m.layers.size());
    if (L.type == LayerType::kConv || L.type == LayerType::kFc) {
      TensorSpec w{L.name + ".weight", li, {}, 0}, b{L.name + ".bias", li, {L.out_channels}, L.out_channels};
      if (L.type == LayerType::kConv) w.dims = {L.out_channels, cur.c, L.kernel, L.kernel};
      else w.dims = {L.out_channels, cur.numel()};
      w.numel = 1;
      for (auto d : w.dims) w.numel *= d;
      L.tensors = {static_cast<int>(m.tensors.size()), static_cast<int>(m.tensors.size() + 1)};
      m.tensors.push_back(w);
      m.tensors.push_back(b);
    }
    cur = L.out;
    m.layers.push_back(std::move(L));
  }
  if (cur.numel() != m.classes)
    throw Error(source + ": the last layer '" + m.layers.back().name + "' outputs " + cur.str() +
                " but the model has " + std::to_string(m.classes) + " classes");
  if (m.tensors.empty()) throw Error(source + ": the model has no conv or fc layer to train");
  return m;
}

ModelSpec load_model_spec_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("model spec '" + path + "' cannot be read");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_model_spec(ss.str(), path);
}

std::string models_dir() {
  if (const char* env = std::getenv("PSBED_MODELS_DIR"); env && *env) return env;
  return PSBED_MODELS_DIR;
}

std::vector<std::string> shipped_model_names() { return {"mlp", "lenet5", "cnn-cifar", "vgg-mini"}; }

ModelSpec load_model(const std::string& name_or_path) {
  bool is_path = name_or_path.find('/') != std::string::npos ||
                 (name_or_path.size() > 5 && name_or_path.substr(name_or_path.size() - 5) == ".toml");
  if (is_path) return load_model_spec_file(name_or_path);
  fs::path p = fs::path(models_dir()) / (name_or_path + ".toml");
  if (!fs::exists(p)) {
    std::string known;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(models_dir(), ec))
      if (e.path().extension() == ".toml") known += (known.empty() ? "" : ", ") + e.path().stem().string();
    throw Error("unknown model '" + name_or_path + "': no " + p.string() + " (models in " +
                models_dir() + ": " + known + "; or give a path to a .toml spec)");
  }
  return load_model_spec_file(p.string());
}

}  // namespace psbed
