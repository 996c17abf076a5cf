#include "core/model_spec.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <vector>

#include "core/error.hpp"

#ifndef PSBED_MODELS_DIR
#define PSBED_MODELS_DIR "workloads/models"
#endif

namespace psbed {
namespace fs = std::filesystem;

const char* to_string(LayerType t) {
  switch (t) {
    case LayerType::kConv:
      return "conv";
    case LayerType::kFc:
      return "fc";
    case LayerType::kRelu:
      return "relu";
    case LayerType::kMaxPool:
      return "maxpool";
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

// Per-sample feature counts and the model's parameter count stay within int: the backends
// index activations, an fc layer's fan-in and tensors with int, and 2^31 floats (8 GiB) per
// copy of the model is already past what a worker here can hold.
constexpr std::int64_t kMaxCount = std::numeric_limits<int>::max();
// Channels, kernel, stride, pad, fc outputs, classes and each input dimension.
constexpr std::int64_t kMaxSize = 1 << 24;

using Keys = std::vector<std::string_view>;
const Keys kTopKeys = {"name", "input", "classes", "layer"};

// The keys each layer type takes ("linear" is another name for "fc").
const Keys& layer_keys(LayerType t) {
  static const Keys conv = {"type",   "name",   "in_channels", "out_channels",
                            "kernel", "stride", "pad"};
  static const Keys fc = {"type", "name", "in", "out"};
  static const Keys relu = {"type", "name"};
  static const Keys maxpool = {"type", "name", "kernel", "stride", "pad"};
  switch (t) {
    case LayerType::kConv:
      return conv;
    case LayerType::kFc:
      return fc;
    case LayerType::kRelu:
      return relu;
    case LayerType::kMaxPool:
      return maxpool;
  }
  return relu;
}

bool has_key(const Keys& keys, std::string_view key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

// "a, b or c"
std::string key_list(const Keys& keys) {
  std::string s;
  for (std::size_t i = 0; i < keys.size(); ++i)
    s += std::string(i == 0 ? "" : i + 1 == keys.size() ? " or " : ", ") + std::string(keys[i]);
  return s;
}

// The product of `factors`, or -1 past int64 (only absurd specs get there).
std::int64_t product(std::initializer_list<std::int64_t> factors) {
  std::int64_t n = 1;
  for (std::int64_t f : factors) {
    if (f != 0 && n > std::numeric_limits<std::int64_t>::max() / f) return -1;
    n *= f;
  }
  return n;
}

std::string count_str(std::int64_t n) {
  return n < 0 ? "more than " + std::to_string(std::numeric_limits<std::int64_t>::max())
               : std::to_string(n);
}

// An integer, or a float with a whole value (`kernel = 3.0`, which files have used); nothing for
// any other value (a fraction, a string, a boolean).
std::optional<std::int64_t> whole(const toml::node& n) {
  if (const auto* i = n.as_integer()) return i->get();
  if (const auto* f = n.as_floating_point()) {
    const double d = f->get();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e18) return std::int64_t(d);
  }
  return std::nullopt;
}

// A TOML value's type in words, for "expected X, got Y".
std::string type_words(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::table:
      return "a table";
    default:
      return "a date or time";
  }
}

struct LayerContext {
  const std::string& source;
  int index;
  std::string name;
  [[noreturn]] void fail(const std::string& msg) const {
    throw Error(source + ": layer #" + std::to_string(index + 1) +
                (name.empty() ? "" : " '" + name + "'") + ": " + msg);
  }
};

// Value `n` of `key` as an int in [lo, hi], range-checked before it is narrowed; `fail(message)`
// throws, naming where the key is.
template <class Fail>
int checked_int(const toml::node& n, const std::string& key, std::int64_t lo, std::int64_t hi,
                const Fail& fail) {
  const std::optional<std::int64_t> v = whole(n);
  if (!v) fail("'" + key + "' must be an integer, got " + type_words(n));
  if (*v < lo || *v > hi)
    fail("'" + key + "' = " + std::to_string(*v) + " is out of range, expected " +
         std::to_string(lo) + " to " + std::to_string(hi));
  return static_cast<int>(*v);
}

// A layer's integer key in [lo, hi].
int get_int(const toml::table& t, const char* key, const LayerContext& ctx, int dflt, bool required,
            std::int64_t lo = 0, std::int64_t hi = kMaxSize) {
  const toml::node* n = t.get(key);
  if (!n) {
    if (required) ctx.fail(std::string("missing '") + key + "'");
    return dflt;
  }
  return checked_int(*n, key, lo, hi, [&](const std::string& msg) { ctx.fail(msg); });
}

// A string key that must not be empty; `dflt` if absent.
std::string get_name(const toml::node* n, const std::string& dflt, const std::string& where) {
  if (!n) return dflt;
  const auto* v = n->as_string();
  if (!v) throw Error(where + "'name' must be a string, got " + type_words(*n));
  if (v->get().empty()) throw Error(where + "'name' must not be empty");
  return v->get();
}

Shape get_shape(const toml::table& root, const std::string& source) {
  const toml::node* n = root.get("input");
  if (!n) throw Error(source + ": missing 'input', expected [channels, height, width]");
  const toml::array* a = n->as_array();
  if (!a || a->size() != 3)
    throw Error(source +
                ": 'input' must be an array of 3 integers [channels, height, width], got " +
                (a ? "an array of " + std::to_string(a->size()) : type_words(*n)));
  int dims[3];
  for (int i = 0; i < 3; ++i) {
    const std::optional<std::int64_t> v = whole((*a)[std::size_t(i)]);
    if (!v)
      throw Error(source + ": 'input' entries must be integers, got " +
                  type_words((*a)[std::size_t(i)]));
    if (*v < 1 || *v > kMaxSize)
      throw Error(source + ": 'input' entry " + std::to_string(*v) +
                  " is out of range, expected 1 to " + std::to_string(kMaxSize));
    dims[i] = static_cast<int>(*v);
  }
  Shape s{dims[0], dims[1], dims[2]};
  const std::int64_t count = product({s.c, s.h, s.w});
  if (count < 0 || count > kMaxCount)
    throw Error(source + ": 'input' " + s.str() + " has " + count_str(count) +
                " features per sample, expected at most " + std::to_string(kMaxCount));
  return s;
}

// The output of a conv or maxpool window sliding over `in`, computed in 64 bits and checked
// before it is narrowed to a Shape.
Shape window_out(int channels, const Shape& in, const LayerSpec& L, const LayerContext& ctx) {
  const std::int64_t padded_h = std::int64_t(in.h) + 2 * std::int64_t(L.pad);
  const std::int64_t padded_w = std::int64_t(in.w) + 2 * std::int64_t(L.pad);
  if (padded_h < L.kernel || padded_w < L.kernel)
    ctx.fail("kernel " + std::to_string(L.kernel) + " does not fit its input " + in.str());
  const std::int64_t h = (padded_h - L.kernel) / L.stride + 1,
                     w = (padded_w - L.kernel) / L.stride + 1;
  const std::int64_t n = product({channels, h, w});
  if (n < 0 || n > kMaxCount)
    ctx.fail("outputs " + std::to_string(channels) + "x" + std::to_string(h) + "x" +
             std::to_string(w) + " = " + count_str(n) + " features per sample, expected at most " +
             std::to_string(kMaxCount));
  return {channels, static_cast<int>(h), static_cast<int>(w)};
}

// ---- parse_model_spec, stage by stage ----

toml::table parse_toml(const std::string& toml_text, const std::string& source) {
  toml::table root;
  try {
    root = toml::parse(toml_text, source);
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << source << ":" << e.source().begin.line << ": " << e.description();
    throw Error(os.str());
  }
  for (const auto& entry : root) {
    const std::string_view key = entry.first.str();
    if (!has_key(kTopKeys, key))
      throw Error(source + ": unknown key '" + std::string(key) + "', expected " +
                  key_list(kTopKeys));
  }
  return root;
}

// The model's name, input shape and classes.
void parse_top(const toml::table& root, const std::string& source, ModelSpec& m) {
  m.source = source;
  m.name = get_name(root.get("name"), fs::path(source).stem().string(), source + ": ");
  m.input = get_shape(root, source);
  m.classes = 10;
  if (const toml::node* n = root.get("classes"))
    m.classes = checked_int(*n, "classes", 2, kMaxSize,
                            [&](const std::string& msg) { throw Error(source + ": " + msg); });
}

const toml::array& layer_array(const toml::table& root, const std::string& source) {
  const toml::node* layers_node = root.get("layer");
  const toml::array* layers = layers_node ? layers_node->as_array() : nullptr;
  if (layers_node && !layers)
    throw Error(source + ": 'layer' must be an array of tables ([[layer]]), got " +
                type_words(*layers_node));
  if (!layers || layers->empty())
    throw Error(source + ": no layers: expected [[layer]] tables with a 'type'");
  return *layers;
}

LayerType layer_type(const toml::table& t, const LayerContext& ctx) {
  const toml::node* type_node = t.get("type");
  if (!type_node) ctx.fail("missing 'type', expected conv, fc, relu or maxpool");
  if (!type_node->is_string()) ctx.fail("'type' must be a string, got " + type_words(*type_node));
  const std::string type = type_node->as_string()->get();
  if (type == "conv") return LayerType::kConv;
  if (type == "fc" || type == "linear") return LayerType::kFc;
  if (type == "relu") return LayerType::kRelu;
  if (type == "maxpool") return LayerType::kMaxPool;
  ctx.fail("unknown type '" + type + "', expected conv, fc, relu or maxpool");
}

// Gives each layer its name: its own, or a default ("relu3": the third relu) that skips every
// name given explicitly anywhere in the model, so an unnamed layer never collides with a named
// one before or after it.
class LayerNames {
 public:
  explicit LayerNames(const toml::array& layers) {
    for (const toml::node& n : layers)
      if (const toml::table* t = n.as_table())
        if (const auto* name = t->get_as<std::string>("name")) explicit_.insert(name->get());
  }

  // Names layer #i (of type L.type) in L and ctx; throws on a bad or duplicate name.
  void assign(const toml::table& t, std::size_t i, LayerSpec& L, LayerContext& ctx) {
    const std::string tname = to_string(L.type);
    const std::string where = ctx.source + ": layer #" + std::to_string(i + 1) + ": ";
    const int nth = ++type_counts_[tname];  // this is the nth layer of its type
    if (t.contains("name")) {
      L.name = get_name(t.get("name"), "", where);
    } else {
      int k = nth;
      do L.name = tname + std::to_string(k++);
      while (explicit_.count(L.name) || taken_.count(L.name));
    }
    ctx.name = L.name;
    if (auto it = taken_.find(L.name); it != taken_.end())
      ctx.fail("duplicate layer name: layer #" + std::to_string(it->second + 1) + " is also '" +
               L.name + "'");
    taken_.emplace(L.name, static_cast<int>(i));
  }

 private:
  std::set<std::string> explicit_;
  std::map<std::string, int> type_counts_;
  std::map<std::string, int> taken_;  // name -> layer index
};

void check_layer_keys(const toml::table& t, LayerType type, const LayerContext& ctx) {
  const std::string tname = to_string(type);
  for (const auto& entry : t) {
    // Not a structured binding: C++17 lambdas cannot capture one (clang rejects it).
    const std::string_view key = entry.first.str();
    const Keys& takes = layer_keys(type);
    if (has_key(takes, key)) continue;
    const bool known =
        has_key(layer_keys(LayerType::kConv), key) || has_key(layer_keys(LayerType::kFc), key);
    if (!known) ctx.fail("unknown key '" + std::string(key) + "', expected " + key_list(takes));
    ctx.fail("key '" + std::string(key) + "' does not apply to type " + tname + ", which takes " +
             key_list(takes));
  }
}

// The layer's own keys, and its output shape from its input `cur`.
void infer_layer(const toml::table& t, const Shape& cur, LayerSpec& L, const LayerContext& ctx) {
  L.in = cur;
  switch (L.type) {
    case LayerType::kConv: {
      int declared_in = get_int(t, "in_channels", ctx, cur.c, false);
      if (declared_in != cur.c)
        ctx.fail("in_channels = " + std::to_string(declared_in) + " but its input is " + cur.str());
      L.out_channels = get_int(t, "out_channels", ctx, 0, true, 1);
      L.kernel = get_int(t, "kernel", ctx, 0, true, 1);
      L.stride = get_int(t, "stride", ctx, 1, false, 1);
      // pad >= kernel is allowed: windows wholly in the zero padding just output the bias.
      L.pad = get_int(t, "pad", ctx, 0, false);
      L.out = window_out(L.out_channels, cur, L, ctx);
      break;
    }
    case LayerType::kFc: {
      // cur.numel() <= kMaxCount: the input and every layer's output are checked.
      const int features_in = static_cast<int>(cur.numel());
      int declared_in = get_int(t, "in", ctx, features_in, false, 0, kMaxCount);
      if (declared_in != features_in)
        ctx.fail("in = " + std::to_string(declared_in) + " but its input " + cur.str() + " has " +
                 std::to_string(features_in) + " features");
      L.out_channels = get_int(t, "out", ctx, 0, true, 1);
      L.out = {L.out_channels, 1, 1};
      break;
    }
    case LayerType::kRelu:
      L.out = cur;
      break;
    case LayerType::kMaxPool: {
      L.kernel = get_int(t, "kernel", ctx, 2, false, 1);
      L.stride = get_int(t, "stride", ctx, L.kernel, false, 1);
      L.pad = get_int(t, "pad", ctx, 0, false);
      // A window wholly in the padding has no input to take the maximum of.
      if (L.pad >= L.kernel)
        ctx.fail("pad = " + std::to_string(L.pad) + " must be less than kernel = " +
                 std::to_string(L.kernel) + " (a window wholly in the padding has no input)");
      L.out = window_out(cur.c, cur, L, ctx);
      break;
    }
  }
}

// A conv or fc layer's weight and bias, added to m.tensors; `total_params` counts the model's
// parameters so far, which stay within kMaxCount.
void add_tensors(LayerSpec& L, const Shape& cur, const LayerContext& ctx, ModelSpec& m,
                 std::int64_t& total_params) {
  if (L.type != LayerType::kConv && L.type != LayerType::kFc) return;
  const int li = static_cast<int>(m.layers.size());
  TensorSpec w{L.name + ".weight", li, {}, 0},
      b{L.name + ".bias", li, {L.out_channels}, L.out_channels};
  if (L.type == LayerType::kConv)
    w.dims = {L.out_channels, cur.c, L.kernel, L.kernel};
  else
    w.dims = {L.out_channels, cur.numel()};
  w.numel = L.type == LayerType::kConv ? product({L.out_channels, cur.c, L.kernel, L.kernel})
                                       : product({L.out_channels, cur.numel()});
  const std::int64_t own =
      w.numel < 0 || w.numel > std::numeric_limits<std::int64_t>::max() - b.numel
          ? -1
          : w.numel + b.numel;
  if (own < 0 || own > kMaxCount - total_params)
    ctx.fail("has " + count_str(own) + " parameters" +
             (total_params ? " after " + std::to_string(total_params) + " in the layers before it"
                           : "") +
             ", expected at most " + std::to_string(kMaxCount) + " in the model");
  total_params += own;
  L.tensors = {static_cast<int>(m.tensors.size()), static_cast<int>(m.tensors.size() + 1)};
  m.tensors.push_back(w);
  m.tensors.push_back(b);
}

}  // namespace

ModelSpec parse_model_spec(const std::string& toml_text, const std::string& source) {
  const toml::table root = parse_toml(toml_text, source);
  ModelSpec m;
  parse_top(root, source, m);
  const toml::array& layers = layer_array(root, source);
  LayerNames names(layers);
  Shape cur = m.input;
  std::int64_t total_params = 0;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const toml::table* t = layers[i].as_table();
    LayerContext ctx{source, static_cast<int>(i), ""};
    if (!t) ctx.fail("expected a table");
    LayerSpec L;
    L.type = layer_type(*t, ctx);
    names.assign(*t, i, L, ctx);
    check_layer_keys(*t, L.type, ctx);
    infer_layer(*t, cur, L, ctx);
    add_tensors(L, cur, ctx, m, total_params);
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
  std::error_code ec;
  if (fs::is_directory(path, ec))
    throw Error("model spec '" + path + "' is a folder, expected a .toml model spec");
  std::ifstream in(path);
  if (!in) {
    const int err = errno;
    throw Error("model spec '" + path + "' cannot be read (" +
                (fs::exists(path, ec) ? std::string(std::strerror(err)) : "no such file") +
                "), expected a .toml model spec or a shipped model's name");
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_model_spec(ss.str(), path);
}

std::string models_dir() {
  if (const char* env = std::getenv("PSBED_MODELS_DIR"); env && *env) return env;
  return PSBED_MODELS_DIR;
}

std::vector<std::string> shipped_model_names() {
  return {"mlp", "lenet5", "cnn-cifar", "vgg-mini"};
}

ModelSpec load_model(const std::string& name_or_path) {
  bool is_path =
      name_or_path.find('/') != std::string::npos ||
      (name_or_path.size() > 5 && name_or_path.substr(name_or_path.size() - 5) == ".toml");
  if (is_path) return load_model_spec_file(name_or_path);
  fs::path p = fs::path(models_dir()) / (name_or_path + ".toml");
  if (!fs::exists(p)) {
    std::string known;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(models_dir(), ec))
      if (e.path().extension() == ".toml")
        known += (known.empty() ? "" : ", ") + e.path().stem().string();
    throw Error("unknown model '" + name_or_path + "': no " + p.string() + " (models in " +
                models_dir() + ": " + known + "; or give a path to a .toml spec)");
  }
  return load_model_spec_file(p.string());
}

}  // namespace psbed
