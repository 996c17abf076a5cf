#include "predictor/calibration.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/stats.hpp"
#include "predictor/band.hpp"
#include "predictor/report.hpp"

namespace psbed::predictor {

namespace {

int sign(double v) { return (v > 0) - (v < 0); }

double number(const nlohmann::json& row, const char* key) {
  const auto it = row.find(key);
  return it != row.end() && it->is_number() ? it->get<double>() : 0.0;
}

// Everything of a configuration but its policy: what a cell's members share. Fields a validate
// leaves out (an older validation.json) count as alike.
nlohmann::json cell_key(const nlohmann::json& row) {
  nlohmann::json key = nlohmann::json::object();
  for (const char* k :
       {"workers", "servers", "mode", "steps", "recorded_steps", "bandwidth_bytes_per_sec",
        "latency_us", "recorded_link", "straggler_ms", "start_stagger_ms", "compute",
        "predicted_compute", "host_cpus", "partition_bytes", "apply_threads"})
    if (row.contains(k)) key[k] = row[k];
  return key;
}

// A policy as its cell names it: the name, and its settings where another member of the cell
// has the same name (p3 with two slice sizes).
std::string option_of(const nlohmann::json& row, bool with_settings) {
  std::string t = row.value("policy", std::string("?"));
  if (!with_settings) return t;
  for (const char* k : {"slice_params", "partition_params", "credit_bytes"})
    if (row.contains(k) && row[k].is_number()) t += std::string(" ") + k + " " + row[k].dump();
  return t;
}

// One cell's regret and tau from its rows (two or more).
nlohmann::json cell_json(const std::string& name, const std::vector<const nlohmann::json*>& rows) {
  std::map<std::string, int> named;
  for (const auto* r : rows) ++named[r->value("policy", std::string("?"))];
  nlohmann::json policies = nlohmann::json::array();
  std::vector<double> predicted, measured;
  for (const auto* r : rows) {
    policies.push_back(option_of(*r, named[r->value("policy", std::string("?"))] > 1));
    predicted.push_back(number(*r, "predicted_images_per_sec"));
    measured.push_back(number(*r, "measured_images_per_sec"));
  }
  const Regret g = regret_of(predicted, measured);
  const std::optional<double> tau = kendall_tau_b(predicted, measured);
  return {{"cell", name},
          {"policies", policies},
          {"predicted_images_per_sec", predicted},
          {"measured_images_per_sec", measured},
          {"predicted_best", policies[g.predicted_best]},
          {"measured_best", policies[g.measured_best]},
          {"regret_pct", g.pct},
          {"kendall_tau", tau ? nlohmann::json(*tau) : nlohmann::json()}};
}

// The cells of two or more policies, in the order their first rows come; the share of them
// with regret within kRegretWithinPct and the median tau go into `out`.
void policy_cells(const nlohmann::json& runs, nlohmann::json& out) {
  std::vector<std::vector<const nlohmann::json*>> members;
  std::map<std::string, std::size_t> cell_at;
  for (const auto& r : runs) {
    const auto [it, fresh] = cell_at.emplace(cell_key(r).dump(), members.size());
    if (fresh) members.emplace_back();
    members[it->second].push_back(&r);
  }
  nlohmann::json cells = nlohmann::json::array();
  std::size_t within = 0;
  std::vector<double> taus;
  for (const auto& m : members) {
    if (m.size() < 2) continue;
    cells.push_back(cell_json(policy_cell_of(*m.front()), m));
    within += cells.back()["regret_pct"].get<double>() <= kRegretWithinPct;
    if (cells.back()["kendall_tau"].is_number()) taus.push_back(cells.back()["kendall_tau"]);
  }
  out["cells"] = cells.size();
  out["cells_regret_within_3pct"] =
      cells.empty() ? nlohmann::json() : nlohmann::json(double(within) / double(cells.size()));
  out["median_kendall_tau"] = taus.empty() ? nlohmann::json() : nlohmann::json(median(taus));
  out["policy_cells"] = cells;
}

}  // namespace

Coverage coverage_of(const std::vector<double>& measured, double low, double high) {
  Coverage c;
  for (double m : measured) c.inside += low <= m && m <= high;
  c.runs = measured.size();
  return c;
}

std::optional<double> kendall_tau_b(const std::vector<double>& x, const std::vector<double>& y) {
  const std::size_t n = std::min(x.size(), y.size());
  // Pairs concordant minus discordant, and the pairs untied in x and in y.
  double score = 0, untied_x = 0, untied_y = 0;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = i + 1; j < n; ++j) {
      const int sx = sign(x[i] - x[j]), sy = sign(y[i] - y[j]);
      score += sx * sy;
      untied_x += sx != 0, untied_y += sy != 0;
    }
  if (untied_x == 0 || untied_y == 0) return std::nullopt;
  return score / std::sqrt(untied_x * untied_y);
}

Regret regret_of(const std::vector<double>& predicted, const std::vector<double>& measured) {
  Regret g;
  const std::size_t n = std::min(predicted.size(), measured.size());
  for (std::size_t i = 1; i < n; ++i) {
    if (measured[i] > measured[g.measured_best]) g.measured_best = i;
    const double p = predicted[i], best = predicted[g.predicted_best];
    if (p > best || (p == best && measured[i] < measured[g.predicted_best])) g.predicted_best = i;
  }
  const double best = n > 0 ? measured[g.measured_best] : 0.0;
  g.pct = best > 0 ? 100 * (best - measured[g.predicted_best]) / best : 0.0;
  return g;
}

std::string policy_cell_of(const nlohmann::json& row) {
  std::string t = row.value("mode", std::string("?")) + ", " + row["workers"].dump() +
                  " worker(s), " + row["servers"].dump() + " server(s), " +
                  row.value("bandwidth", std::string("?"));
  if (number(row, "latency_us") != 0) t += ", " + fmt(number(row, "latency_us"), 0) + " us";
  if (number(row, "straggler_ms") != 0)
    t += ", straggler " + fmt(number(row, "straggler_ms"), 1) + " ms";
  if (number(row, "start_stagger_ms") != 0)
    t += ", start stagger " + fmt(number(row, "start_stagger_ms"), 1) + " ms";
  if (row.contains("steps")) t += ", " + row["steps"].dump() + " steps";
  if (row.contains("predicted_compute"))
    t += ", " + row.value("predicted_compute", std::string("?")) + " compute";
  return t;
}

nlohmann::json calibration_of(const nlohmann::json& runs) {
  Coverage all;
  nlohmann::json outside = nlohmann::json::array();
  std::vector<double> widths, errors;
  for (const auto& r : runs) {
    const std::vector<double> measured =
        r.value("measured_runs_images_per_sec", std::vector<double>{});
    const double low = number(r, "predicted_low"), high = number(r, "predicted_high");
    const Coverage c = coverage_of(measured, low, high);
    all.inside += c.inside, all.runs += c.runs;
    if (c.inside < c.runs)
      outside.push_back({{"run", r.value("run", std::string())},
                         {"policy", r.value("policy", std::string())},
                         {"cell", policy_cell_of(r)},
                         {"runs_outside", c.runs - c.inside},
                         {"runs", c.runs},
                         {"measured_runs_images_per_sec", measured},
                         {"predicted_low", low},
                         {"predicted_high", high}});
    widths.push_back(number(r, "predicted_band_width_pct"));
    errors.push_back(std::fabs(number(r, "error_pct")));
  }
  std::sort(errors.begin(), errors.end());
  nlohmann::json out = {
      {"coverage", all.runs > 0 ? nlohmann::json(all.share()) : nlohmann::json()},
      {"runs_inside", all.inside},
      {"runs", all.runs},
      {"median_band_width_pct", widths.empty() ? nlohmann::json() : nlohmann::json(median(widths))},
      {"median_abs_error_pct", errors.empty() ? nlohmann::json() : nlohmann::json(median(errors))},
      {"p95_abs_error_pct",
       errors.empty() ? nlohmann::json() : nlohmann::json(quantile(errors, 0.95))},
      {"outside_band", outside}};
  policy_cells(runs, out);
  return out;
}

}  // namespace psbed::predictor
