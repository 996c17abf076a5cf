#include "predictor/report.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/units.hpp"
#include "predictor/commands.hpp"
#include "predictor/parallel.hpp"

namespace psbed::predictor {

namespace fs = std::filesystem;

void write_json(const std::string& path, const nlohmann::json& j) {
  if (path.empty()) return;
  ensure_writable_file(path, "'" + path + "'");
  std::ofstream out(path);
  if (!out) throw Error("cannot write '" + path + "'");
  out << j.dump(2) << "\n";
}

std::string fmt(double v, int prec) {
  if (std::isinf(v)) return "inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", prec, v);
  return buf;
}

std::string seed_range(std::uint64_t seed, int seeds) {
  const std::uint64_t last = seed + std::uint64_t(seeds - 1);  // unsigned: wraps past 2^64 - 1 to 0
  if (seeds <= 1) return std::to_string(seed);
  if (last >= seed) return std::to_string(seed) + " to " + std::to_string(last);
  const std::string before = seed == UINT64_MAX
                                 ? std::to_string(seed)
                                 : std::to_string(seed) + " to " + std::to_string(UINT64_MAX);
  return before + ", then " + (last == 0 ? std::string("0") : "0 to " + std::to_string(last));
}

std::string regime_edge_note() {
  return "Over " + fmt(kRegimeSpreadPct, 0) + "%, the configuration sits between two regimes " +
         "(workers in lockstep or drifted apart) and a real run can land in either";
}

void announce(const char* command, std::size_t configurations, const std::string& source, int seeds,
              int jobs) {
  std::fprintf(stderr, "%s: %zu configuration(s)%s, %d seed(s) each, on %d thread(s)\n", command,
               configurations, source.c_str(), seeds,
               worker_threads(jobs, configurations * std::size_t(seeds)));
}

std::string run_name(const std::string& dir) {
  fs::path p(dir);
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().string();
}

std::string bandwidth_text(double bytes_per_sec) {
  return bytes_per_sec > 0 ? format_bandwidth(bytes_per_sec * 8) : std::string("unlimited");
}

}  // namespace psbed::predictor
