#include "core/straggler.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>

#include "core/error.hpp"
#include "core/units.hpp"

namespace psbed {

namespace {

std::string trim(const std::string& s) {
  std::size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::size_t from = 0;
  for (;;) {
    const std::size_t at = text.find(sep, from);
    out.push_back(trim(text.substr(from, at == std::string::npos ? std::string::npos : at - from)));
    if (at == std::string::npos) return out;
    from = at + 1;
  }
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// Bytes/s as the flag takes it back: "100mbit", "1.5gbit".
std::string bandwidth_text(double bytes_per_sec) {
  const double bps = bytes_per_sec * 8;
  if (bps >= 1e9) return number(bps / 1e9) + "gbit";
  if (bps >= 1e6) return number(bps / 1e6) + "mbit";
  if (bps >= 1e3) return number(bps / 1e3) + "kbit";
  return number(bps) + "bit";
}

// "2x" -> 2; anything but a finite number >= 1 followed by x throws.
double parse_factor(const std::string& value, const std::string& text) {
  const auto bad = [&] {
    return Error("bad --straggler '" + text + "': compute takes a factor of 1 or more with an x " +
                 "(e.g. compute=2x), got '" + value + "'");
  };
  if (value.size() < 2 || std::tolower(static_cast<unsigned char>(value.back())) != 'x')
    throw bad();
  const std::string digits = value.substr(0, value.size() - 1);
  std::size_t pos = 0;
  double f = 0;
  try {
    f = std::stod(digits, &pos);
  } catch (const std::exception&) {
    throw bad();
  }
  if (pos != digits.size() || !std::isfinite(f) || f < 1 || f > 1e6) throw bad();
  return f;
}

// One KEY=VALUE of `text` onto `s`; `seen` keeps a key from being given twice.
void parse_key(const std::string& kv, const std::string& text, Straggler& s,
               std::vector<std::string>& seen) {
  const std::size_t eq = kv.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == kv.size())
    throw Error("bad --straggler '" + text + "': expected KEY=VALUE (compute=2x, " +
                "bandwidth=100mbit), got '" + kv + "'");
  const std::string key = trim(kv.substr(0, eq)), value = trim(kv.substr(eq + 1));
  for (const auto& k : seen)
    if (k == key)
      throw Error("bad --straggler '" + text + "': " + key + " is given twice for worker-" +
                  std::to_string(s.worker));
  seen.push_back(key);
  if (key == "compute") {
    s.compute_factor = parse_factor(value, text);
  } else if (key == "bandwidth") {
    double bps = 0;
    try {
      bps = parse_bandwidth_bps(value);
    } catch (const Error& e) {
      throw Error("bad --straggler '" + text + "': " + e.what());
    }
    if (!(bps > 0))
      throw Error("bad --straggler '" + text +
                  "': bandwidth must be above 0 (e.g. bandwidth=100mbit), got '" + value + "'");
    s.bandwidth_bytes_per_sec = bps / 8;
  } else {
    throw Error("bad --straggler '" + text + "': unknown key '" + key +
                "', expected compute or bandwidth");
  }
}

// "worker-3" -> 3; anything else throws.
int parse_worker(const std::string& name, const std::string& text) {
  const std::string prefix = "worker-";
  const std::string digits = name.substr(std::min(name.size(), prefix.size()));
  if (name.compare(0, prefix.size(), prefix) != 0 || digits.empty() || digits.size() > 6 ||
      digits.find_first_not_of("0123456789") != std::string::npos)
    throw Error("bad --straggler '" + text + "': unknown worker '" + name +
                "', expected worker-N (worker-0, worker-1, ...)");
  return std::stoi(digits);
}

}  // namespace

void parse_straggler_keys(const std::string& text, Straggler& s) {
  std::vector<std::string> seen;
  for (const auto& kv : split(text, ',')) parse_key(kv, text, s, seen);
}

std::vector<Straggler> parse_stragglers(const std::vector<std::string>& texts, int workers) {
  std::vector<Straggler> out;
  for (const auto& text : texts) {
    std::vector<std::string> seen;
    bool open = false;
    for (const auto& item : split(text, ',')) {
      const std::size_t colon = item.find(':');
      std::string kv = item;
      if (colon != std::string::npos) {
        Straggler s;
        s.worker = parse_worker(trim(item.substr(0, colon)), text);
        out.push_back(s);
        seen.clear();
        open = true;
        kv = trim(item.substr(colon + 1));
      } else if (!open) {
        throw Error("bad --straggler '" + text +
                    "': expected worker-N:KEY=VALUE (e.g. worker-1:compute=2x)");
      }
      parse_key(kv, text, out.back(), seen);
    }
  }
  check_stragglers(out, workers);
  return out;
}

void check_stragglers(const std::vector<Straggler>& stragglers, int workers) {
  for (std::size_t i = 0; i < stragglers.size(); ++i) {
    const Straggler& s = stragglers[i];
    const std::string name = "worker-" + std::to_string(s.worker);
    if (workers > 0 && (s.worker < 0 || s.worker >= workers))
      throw Error("bad --straggler " + name + ": the cluster has " + std::to_string(workers) +
                  " worker(s), worker-0 to worker-" + std::to_string(workers - 1));
    if (!(s.compute_factor >= 1) || !std::isfinite(s.compute_factor))
      throw Error("bad --straggler " + name + ": its compute factor is " +
                  number(s.compute_factor) + ", expected 1 or more");
    if (!(s.bandwidth_bytes_per_sec >= 0) || !std::isfinite(s.bandwidth_bytes_per_sec))
      throw Error("bad --straggler " + name + ": its bandwidth is " +
                  number(s.bandwidth_bytes_per_sec) +
                  " bytes/s, expected 0 (the cluster's) or more");
    for (std::size_t j = 0; j < i; ++j)
      if (stragglers[j].worker == s.worker)
        throw Error("bad --straggler: " + name + " is given twice (give its keys once: " + name +
                    ":compute=2x,bandwidth=100mbit)");
  }
}

std::string straggler_keys(const Straggler& s) {
  std::string t;
  if (s.compute_factor != 1) t = "compute=" + number(s.compute_factor) + "x";
  if (s.bandwidth_bytes_per_sec > 0)
    t += (t.empty() ? "" : ",") + std::string("bandwidth=") +
         bandwidth_text(s.bandwidth_bytes_per_sec);
  return t;
}

std::string to_string(const Straggler& s) {
  const std::string keys = straggler_keys(s);
  return "worker-" + std::to_string(s.worker) + ":" + (keys.empty() ? "compute=1x" : keys);
}

std::string to_string(const std::vector<Straggler>& stragglers) {
  std::string t;
  for (const auto& s : stragglers) t += (t.empty() ? "" : "; ") + to_string(s);
  return t;
}

nlohmann::json stragglers_json(const std::vector<Straggler>& stragglers) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& s : stragglers)
    a.push_back({{"worker", s.worker},
                 {"compute_factor", s.compute_factor},
                 {"bandwidth_bytes_per_sec", s.bandwidth_bytes_per_sec}});
  return a;
}

std::vector<Straggler> stragglers_from_json(const nlohmann::json& j, const std::string& where) {
  const auto bad = [&](const std::string& why) {
    return Error(where + ": stragglers " + j.dump() + " " + why);
  };
  if (!j.is_array()) throw bad("is not a list");
  std::vector<Straggler> out;
  for (const auto& e : j) {
    if (!e.is_object() || !e.contains("worker") || !e["worker"].is_number_integer())
      throw bad("has an entry without a whole-number worker");
    Straggler s;
    s.worker = e["worker"].get<int>();
    const auto num = [&](const char* key, double def) {
      if (!e.contains(key)) return def;
      if (!e[key].is_number()) throw bad(std::string("has a ") + key + " that is not a number");
      return e[key].get<double>();
    };
    s.compute_factor = num("compute_factor", 1);
    s.bandwidth_bytes_per_sec = num("bandwidth_bytes_per_sec", 0);
    out.push_back(s);
  }
  try {
    check_stragglers(out, 0);
  } catch (const Error& e) {
    throw Error(where + ": " + e.what());
  }
  return out;
}

Straggler straggler_of(const std::vector<Straggler>& stragglers, int w) {
  for (const auto& s : stragglers)
    if (s.worker == w) return s;
  Straggler none;
  none.worker = w;
  return none;
}

}  // namespace psbed
