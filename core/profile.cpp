#include "core/profile.hpp"

#include <filesystem>
#include <fstream>
#include <limits>
#include <numeric>
#include <sstream>
#include <type_traits>

#include "core/error.hpp"
#include "core/json_text.hpp"

namespace psbed {

namespace {

double mean(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
}

template <class T>
T field(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) throw Error(where + ": missing field '" + key + "'");
  // A whole number must be one: get<int> would take 32.5 for 32 without a word.
  // Nor a larger one than T holds: get<int> would wrap 10^12 round to another number.
  if constexpr (std::is_integral_v<T>) {
    const nlohmann::json& v = j.at(key);
    if (!v.is_number_integer())
      throw Error(where + ": field '" + key + "' is " + json_excerpt(v) +
                  ", expected a whole number");
    using L = std::numeric_limits<T>;
    const bool fits = v.is_number_unsigned() ? v.get<std::uint64_t>() <= std::uint64_t(L::max())
                                             : v.get<std::int64_t>() >= std::int64_t(L::min()) &&
                                                   v.get<std::int64_t>() <= std::int64_t(L::max());
    if (!fits)
      throw Error(where + ": field '" + key + "' is " + json_excerpt(v) +
                  ", expected a whole number from " + std::to_string(L::min()) + " to " +
                  std::to_string(L::max()));
  }
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw Error(where + ": field '" + key + "' has the wrong type (" + j.at(key).type_name() + ")");
  }
}

template <class T>
T field_or(const nlohmann::json& j, const char* key, T fallback, const std::string& where) {
  return j.is_object() && j.contains(key) ? field<T>(j, key, where) : fallback;
}

// A figure that cannot be negative: refused when the profile is read, naming the field, rather
// than failing a simulation later (a hand-edited bandwidth of -1 failed after predict's table
// header, as "simulation: ...").
// Past 10^12 (a bandwidth of a terabyte a second, a cost of eleven days) a figure is no
// measurement, and an infinite one (1e400 reads as that) breaks the simulation's arithmetic.
constexpr double kMaxFigure = 1e12;

double not_negative(double v, const char* key, const std::string& where, const char* zero = "") {
  if (!(v >= 0))
    throw Error(where + ": " + key + " is " + nlohmann::json(v).dump() + ", expected 0 or more" +
                zero);
  if (!(v < kMaxFigure))
    throw Error(where + ": " + key + " is " + nlohmann::json(v).dump() + ", expected below 10^12");
  return v;
}

// A whole number in [lo, hi]: a count that drives the simulation's work (host.cpus of 10^7 made
// every message scan ten million cores, and a prediction run for minutes).
int count_in(int v, const char* key, const std::string& where, int lo, int hi,
             const char* note = "") {
  if (v < lo || v > hi)
    throw Error(where + ": " + key + " is " + std::to_string(v) + ", expected " +
                std::to_string(lo) + " to " + std::to_string(hi) + note);
  return v;
}

// Durations in milliseconds, each below 10^7 (almost three hours a layer or a step).
std::vector<double> samples(const nlohmann::json& j, const char* key, const std::string& where) {
  auto v = field<std::vector<double>>(j, key, where);
  for (double x : v) {
    if (!(x >= 0)) throw Error(where + ": '" + key + "' holds a negative or NaN duration");
    if (!(x < 1e7))
      throw Error(where + ": '" + key + "' holds " + nlohmann::json(x).dump() +
                  " ms, expected below 10^7");
  }
  return v;
}

}  // namespace

std::int64_t Profile::parameter_bytes() const {
  std::int64_t b = 0;
  for (const auto& t : tensors) b += t.bytes;
  return b;
}

double Profile::mean_forward_ms(int layer) const {
  return mean(layers.at(std::size_t(layer)).forward_ms);
}
double Profile::mean_backward_ms(int layer) const {
  return mean(layers.at(std::size_t(layer)).backward_ms);
}

double Profile::mean_compute_ms() const {
  double s = 0;
  for (int l = 0; l < int(layers.size()); ++l) s += mean_forward_ms(l) + mean_backward_ms(l);
  return s;
}

nlohmann::json Profile::to_json() const {
  nlohmann::json j;
  j["format"] = "psbed-profile/1";
  j["model"] = model;
  j["batch"] = batch;
  j["tensors"] = nlohmann::json::array();
  for (const auto& t : tensors)
    j["tensors"].push_back({{"name", t.name}, {"layer", t.layer}, {"bytes", t.bytes}});
  j["layers"] = nlohmann::json::array();
  for (const auto& l : layers)
    j["layers"].push_back(
        {{"name", l.name}, {"forward_ms", l.forward_ms}, {"backward_ms", l.backward_ms}});
  j["server"] = {{"apply_ns_per_byte", apply_ns_per_byte},
                 {"apply_overhead_us", apply_overhead_us}};
  j["link"] = {{"bandwidth_bytes_per_sec", bandwidth_bytes_per_sec},
               {"latency_us", latency_us},
               {"shaped", shaped},
               {"message_cost_us", message_cost_us},
               {"message_latency_us", message_latency_us},
               {"transit_ns_per_byte", transit_ns_per_byte}};
  if (host_cpus > 0) {
    j["host"] = {{"cpus", host_cpus},
                 {"cpu_per_message_us", cpu_per_message_us},
                 {"cpu_per_byte_ns", cpu_per_byte_ns}};
    if (contention > 0) j["host"]["contention"] = contention;
    if (cpu_per_data_message_us > 0) j["host"]["cpu_per_data_message_us"] = cpu_per_data_message_us;
  }
  if (host_cv > 0 || start_spread_ms > 0)
    j["variation"] = {{"host_cv", host_cv}, {"start_spread_ms", start_spread_ms}};
  j["step_overhead_ms"] = step_overhead_ms;
  j["source"] = source;
  return j;
}

Profile Profile::from_json(const nlohmann::json& j, const std::string& name) {
  const std::string format = field<std::string>(j, "format", name);
  if (format != "psbed-profile/1")
    throw Error(name + ": format '" + format +
                "' is not a profile this version reads (expected psbed-profile/1)");
  Profile p;
  p.model = field<std::string>(j, "model", name);
  p.batch = count_in(field<int>(j, "batch", name), "batch", name, 1, 1 << 20);
  for (const auto& t : field<nlohmann::json>(j, "tensors", name)) {
    const std::string where = name + ": tensors[" + std::to_string(p.tensors.size()) + "]";
    p.tensors.push_back({field<std::string>(t, "name", where), field<int>(t, "layer", where),
                         field<std::int64_t>(t, "bytes", where)});
    if (p.tensors.back().bytes < 0)
      throw Error(where + ": bytes is " + std::to_string(p.tensors.back().bytes) +
                  ", expected 0 or more");
    if (p.tensors.back().bytes > (std::int64_t(1) << 40))
      throw Error(where + ": bytes is " + std::to_string(p.tensors.back().bytes) +
                  ", expected at most 2^40 (1 TiB)");
  }
  for (const auto& l : field<nlohmann::json>(j, "layers", name)) {
    const std::string where = name + ": layers[" + std::to_string(p.layers.size()) + "]";
    ProfileLayer layer{field<std::string>(l, "name", where), samples(l, "forward_ms", where),
                       samples(l, "backward_ms", where)};
    if (layer.forward_ms.empty() || layer.backward_ms.empty())
      throw Error(where + " (" + layer.name +
                  "): needs at least one forward and one backward sample");
    p.layers.push_back(std::move(layer));
  }
  if (p.layers.empty()) throw Error(name + ": 'layers' is empty");
  for (const auto& t : p.tensors)
    if (t.layer < 0 || t.layer >= int(p.layers.size()))
      throw Error(name + ": tensor '" + t.name + "' names layer " + std::to_string(t.layer) +
                  ", but there are " + std::to_string(p.layers.size()) + " layers");
  // The costs every profile has had: required, since one left out would be taken for 0 (a free
  // apply, an unlimited link) and the prediction come out several times too fast, without a word.
  // The host costs and the link's later fields are optional: older profiles lack them.
  const auto server = field<nlohmann::json>(j, "server", name);
  p.apply_ns_per_byte = not_negative(field<double>(server, "apply_ns_per_byte", name + ": server"),
                                     "apply_ns_per_byte", name + ": server");
  p.apply_overhead_us = not_negative(field<double>(server, "apply_overhead_us", name + ": server"),
                                     "apply_overhead_us", name + ": server");
  const auto link = field<nlohmann::json>(j, "link", name);
  p.bandwidth_bytes_per_sec =
      not_negative(field<double>(link, "bandwidth_bytes_per_sec", name + ": link"),
                   "bandwidth_bytes_per_sec", name + ": link", " (0: no link limit)");
  p.latency_us = not_negative(field<double>(link, "latency_us", name + ": link"), "latency_us",
                              name + ": link");
  p.shaped = field_or<std::string>(link, "shaped", "", name + ": link");
  const std::string at_link = name + ": link", at_host = name + ": host";
  for (auto [key, to] : {std::pair<const char*, double*>{"message_cost_us", &p.message_cost_us},
                         {"message_latency_us", &p.message_latency_us},
                         {"transit_ns_per_byte", &p.transit_ns_per_byte}})
    *to = not_negative(field_or<double>(link, key, 0.0, at_link), key, at_link);
  const auto host = field_or<nlohmann::json>(j, "host", nlohmann::json::object(), name);
  p.host_cpus = count_in(field_or<int>(host, "cpus", 0, at_host), "cpus", at_host, 0, kMaxHostCpus,
                         " (0: not measured)");
  p.cpu_per_message_us = not_negative(field_or<double>(host, "cpu_per_message_us", 0.0, at_host),
                                      "cpu_per_message_us", at_host);
  p.cpu_per_byte_ns = not_negative(field_or<double>(host, "cpu_per_byte_ns", 0.0, at_host),
                                   "cpu_per_byte_ns", at_host);
  p.contention = field_or<double>(host, "contention", 0.0, at_host);
  p.cpu_per_data_message_us =
      not_negative(field_or<double>(host, "cpu_per_data_message_us", 0.0, at_host),
                   "cpu_per_data_message_us", at_host);
  if (!(p.contention >= 0 && p.contention <= 10))
    throw Error(name + ": host: contention must be 0 to 10 (every CPU cost x 1 to 11)");
  const auto variation = field_or<nlohmann::json>(j, "variation", nlohmann::json::object(), name);
  const std::string at_variation = name + ": variation";
  p.host_cv = field_or<double>(variation, "host_cv", 0.0, at_variation);
  if (!(p.host_cv >= 0 && p.host_cv <= 1))
    throw Error(at_variation + ": host_cv must be 0 to 1 (a coefficient of variation)");
  p.start_spread_ms = field_or<double>(variation, "start_spread_ms", 0.0, at_variation);
  if (!(p.start_spread_ms >= 0 && p.start_spread_ms <= 600e3))
    throw Error(at_variation + ": start_spread_ms must be 0 to 600000 (10 minutes)");
  p.step_overhead_ms = samples(j, "step_overhead_ms", name);
  p.source = field_or<nlohmann::json>(j, "source", nlohmann::json::object(), name);
  // Where the profile came from: read by the commands that print or reuse it, so a field of the
  // wrong kind is named here rather than failing there as a bare JSON type error.
  if (!p.source.is_object())
    throw Error(name + ": 'source' is not an object, expected where the profile came from");
  using T = nlohmann::json::value_t;
  static const std::vector<std::pair<const char*, T>> kinds = {
      {"compute", T::string},
      {"model_toml", T::string},
      {"run", T::string},
      {"calibrated", T::string},
      {"calibrated_link_model", T::string},
      {"workers", T::number_integer},
      {"servers", T::number_integer},
      {"measured_steps_per_sec", T::number_float},
      {"simulated_steps_per_sec", T::number_float},
      {"host_busy_cores", T::number_float},
      {"host_cpu_per_step_ms", T::number_float},
      {"steady_cpu_s", T::number_float},
      {"pulls_latency_us", T::number_float},
      {"refused_message_cost_us", T::number_float},
      {"refused_message_latency_us", T::number_float},
      {"refused_transit_ns_per_byte", T::number_float},
      {"warnings", T::array},
      {"contention_run", T::object}};
  for (const auto& [key, kind] : kinds) {
    if (!p.source.contains(key)) continue;
    const nlohmann::json& v = p.source[key];
    const bool ok = kind == T::number_float     ? v.is_number()
                    : kind == T::number_integer ? v.is_number_integer()
                                                : v.type() == kind;
    if (!ok)
      throw Error(name + ": source." + key + " is not " +
                  (kind == T::string           ? "a string"
                   : kind == T::number_integer ? "a whole number"
                   : kind == T::number_float   ? "a number"
                   : kind == T::array          ? "a list"
                                               : "an object"));
  }
  if (p.source.contains("warnings"))
    for (const auto& w : p.source["warnings"])
      if (!w.is_string())
        throw Error(name + ": source.warnings holds a non-string, expected lines of text");
  return p;
}

Profile Profile::load(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error("profile '" + path +
                "' is a folder, expected a profile.json written by `psbed profile`");
  std::ifstream in(path);
  if (!in)
    throw Error("cannot read profile '" + path +
                "' (expected a profile.json written by `psbed profile`)");
  std::ostringstream text;
  text << in.rdbuf();
  return parse(text.str(), "profile '" + path + "'");
}

Profile Profile::parse(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    throw Error(name + " is not valid JSON: " + e.what());
  }
  return from_json(j, name);
}

void Profile::save(const std::string& path) const {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error("cannot write profile '" + path + "': it is a folder, expected a file name");
  std::ofstream out(path);
  if (!out) throw Error("cannot write profile '" + path + "'");
  out << to_json().dump(1) << "\n";
  if (!out) throw Error("writing profile '" + path + "' failed");
}

void Profile::check_matches(const ModelSpec& spec, const std::string& profile_name) const {
  const std::string what = profile_name + " (model " + model + ")";
  if (layers.size() != spec.layers.size())
    throw Error(what + " has " + std::to_string(layers.size()) + " layers, but model " + spec.name +
                " has " + std::to_string(spec.layers.size()));
  for (std::size_t l = 0; l < layers.size(); ++l)
    if (layers[l].name != spec.layers[l].name)
      throw Error(what + ": layer " + std::to_string(l) + " is '" + layers[l].name +
                  "', but model " + spec.name + " has '" + spec.layers[l].name + "' there");
  if (tensors.size() != spec.tensors.size())
    throw Error(what + " has " + std::to_string(tensors.size()) + " tensors, but model " +
                spec.name + " has " + std::to_string(spec.tensors.size()));
  for (std::size_t t = 0; t < tensors.size(); ++t)
    if (tensors[t].bytes != spec.tensors[t].bytes())
      throw Error(what + ": tensor '" + tensors[t].name + "' has " +
                  std::to_string(tensors[t].bytes) + " bytes, but model " + spec.name + " has " +
                  std::to_string(spec.tensors[t].bytes()));
}

ComputeSampler::ComputeSampler(const Profile& profile, std::uint64_t seed)
    : profile_(&profile), rng_(seed) {}

double ComputeSampler::draw(const std::vector<double>& s) {
  if (s.empty()) return 0.0;
  if (s.size() == 1) return s[0] / 1e3;
  std::uniform_int_distribution<std::size_t> pick(0, s.size() - 1);
  return s[pick(rng_)] / 1e3;
}

double ComputeSampler::forward_s(int layer) {
  return draw(profile_->layers.at(std::size_t(layer)).forward_ms);
}
double ComputeSampler::backward_s(int layer) {
  return draw(profile_->layers.at(std::size_t(layer)).backward_ms);
}
double ComputeSampler::step_overhead_s() { return draw(profile_->step_overhead_ms); }

}  // namespace psbed
