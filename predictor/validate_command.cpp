// `psbed validate`: the runs measured against their predictions, as validation.json, a markdown
// table (validation.md, and stdout), and a plot drawn by plot_validation.py (written beside them).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/run_program.hpp"
#include "core/units.hpp"
#include "predictor/band.hpp"
#include "predictor/calibration.hpp"
#include "predictor/commands.hpp"
#include "predictor/plot_validation_py.hpp"
#include "predictor/report.hpp"

namespace psbed::predictor {

namespace fs = std::filesystem;

namespace {

// validate_runs into a report folder: --out is checked before the simulations, not after; a
// folder this call made goes again if they fail (no empty report folder left behind). Only that
// folder, only empty, and never one that was there before under another spelling
// (foo/../results).
nlohmann::json validate_into_out(const ValidateOptions& o, const Profile& profile,
                                 const ModelSpec& spec) {
  std::error_code ec;
  const fs::path out_path = fs::weakly_canonical(fs::absolute(o.out), ec);
  const bool made_out = !ec && !fs::exists(out_path);
  ensure_writable_dir(o.out, "--out");
  nlohmann::json v;
  try {
    v = validate_runs(profile, spec, o.runs, o.sim);
  } catch (...) {
    if (made_out && fs::is_directory(out_path, ec) && fs::is_empty(out_path, ec))
      fs::remove(out_path, ec);
    throw;
  }
  return v;
}

// A row's policy settings as the table names them: "slice 40000, credit 4.00 MiB"; empty for none.
std::string settings_of(const nlohmann::json& r) {
  std::string t;
  if (r["slice_params"].is_number())
    t += "slice " + std::to_string(r["slice_params"].get<std::int64_t>());
  if (r["partition_params"].is_number())
    t += "partition " + std::to_string(r["partition_params"].get<std::int64_t>());
  if (r["credit_bytes"].is_number())
    t += std::string(t.empty() ? "" : ", ") + (r["policy"] == "prophet" ? "block " : "credit ") +
         format_bytes(double(r["credit_bytes"].get<std::int64_t>()));
  return t;
}

// The columns of the table beyond the fixed ones.
struct Columns {
  bool settings = false, latency = false, straggler = false, stagger = false, steps = false,
       compute = false, stragglers = false, comm = false;
  bool repeated = false;  // configurations of several runs: their range
  bool seeded = false;    // several seeds: their spread
};

// The latency, the straggler and the start stagger get a column where a run has one: runs that
// differ only in those are configurations of their own. The policy's settings, the simulated
// steps and the compute get a column where they tell configurations apart: a policy that has
// settings, steps or compute that differ between rows.
Columns table_columns(const nlohmann::json& v, bool seeded) {
  auto any = [&](const char* key) {
    for (const auto& r : v["runs"])
      if (r[key].get<double>() != 0) return true;
    return false;
  };
  auto differ = [&](const char* key) {
    for (const auto& r : v["runs"])
      if (r[key] != v["runs"][0][key]) return true;
    return false;
  };
  Columns c;
  c.latency = any("latency_us"), c.straggler = any("straggler_ms"),
  c.stagger = any("start_stagger_ms");
  for (const auto& r : v["runs"])
    c.stragglers = c.stragglers || !r.value("stragglers", std::string()).empty();
  for (const auto& r : v["runs"]) c.settings = c.settings || !settings_of(r).empty();
  c.steps = differ("steps"), c.compute = differ("predicted_compute");
  for (const auto& r : v["runs"]) c.comm = c.comm || r.value("comm", std::string("ps")) != "ps";
  c.repeated = v["configurations"].get<std::size_t>() < v["runs_measured"].get<std::size_t>();
  c.seeded = seeded;
  return c;
}

// How many configurations' draws split into regimes, how many are off by more than 10%, and how
// many of those split.
struct EdgeCounts {
  int edge = 0, edge_off = 0, off = 0;
};

// The table: a row per configuration.
EdgeCounts write_table(std::ostream& md, const nlohmann::json& v, const Columns& k) {
  md << "| run | workers | servers | policy |" << (k.comm ? " comm |" : "")
     << (k.settings ? " settings |" : "") << " mode | bandwidth |"
     << (k.latency ? " latency us |" : "") << (k.straggler ? " straggler ms |" : "")
     << (k.stragglers ? " stragglers |" : "") << (k.stagger ? " start stagger ms |" : "")
     << (k.steps ? " steps |" : "") << (k.compute ? " compute |" : "") << " measured images/s |"
     << (k.repeated ? " runs (range) |" : "") << " predicted images/s |"
     << (k.seeded ? " band (images/s) |" : "") << " error % |\n"
     << "|---|---:|---:|---|" << (k.comm ? "---|" : "") << (k.settings ? "---|" : "") << "---|---|"
     << (k.latency ? "---:|" : "") << (k.straggler ? "---:|" : "") << (k.stragglers ? "---|" : "")
     << (k.stagger ? "---:|" : "") << (k.steps ? "---:|" : "") << (k.compute ? "---|" : "")
     << "---:|" << (k.repeated ? "---|" : "") << "---:|" << (k.seeded ? "---:|" : "") << "---:|\n";
  EdgeCounts n;
  for (const auto& r : v["runs"]) {
    md << "| " << run_name(r["run"].get<std::string>()) << " | " << r["workers"] << " | "
       << r["servers"] << " | " << r["policy"].get<std::string>() << " | ";
    if (k.comm) md << r.value("comm", std::string("ps")) << " | ";
    if (k.settings) md << settings_of(r) << " | ";
    md << r["mode"].get<std::string>() << " | " << r["bandwidth"].get<std::string>() << " | ";
    if (k.latency) md << fmt(r["latency_us"], 0) << " | ";
    if (k.straggler) md << fmt(r["straggler_ms"], 1) << " | ";
    if (k.stragglers) md << r.value("stragglers", std::string()) << " | ";
    if (k.stagger) md << fmt(r["start_stagger_ms"], 1) << " | ";
    if (k.steps) md << r["steps"] << " | ";
    if (k.compute) md << r["predicted_compute"].get<std::string>() << " | ";
    md << fmt(r["measured_images_per_sec"], 0) << " |";
    if (k.repeated)
      md << " " << r["repeats"] << " (" << fmt(r["measured_min_images_per_sec"], 0) << "-"
         << fmt(r["measured_max_images_per_sec"], 0) << ") |";
    md << " " << fmt(r["predicted_images_per_sec"], 0) << " |";
    // The band one run should land in; "2 regimes" where the draws split (predictor/band.hpp).
    const std::size_t regimes = r["predicted_regimes"].size();
    if (k.seeded)
      md << " " << fmt(r["predicted_low"], 0) << "-" << fmt(r["predicted_high"], 0)
         << (regimes > 1 ? " (" + std::to_string(regimes) + " regimes)" : "") << " |";
    md << " " << fmt(r["error_pct"], 1) << " |\n";
    const bool is_off = std::abs(r["error_pct"].get<double>()) > 10;
    n.edge += regimes > 1, n.off += is_off, n.edge_off += is_off && regimes > 1;
  }
  return n;
}

// The lines under the table: the errors, the runs left out, the configurations on a regime's edge.
void write_summary(std::ostream& md, const nlohmann::json& v, const ValidateOptions& o,
                   const Columns& k, const EdgeCounts& n) {
  md << "\nmean |error| " << fmt(v["mean_abs_error_pct"], 1) << " %, max |error| "
     << fmt(v["max_abs_error_pct"], 1) << " % over " << v["configurations"] << " configuration(s)";
  if (k.repeated)
    md << " (" << v["runs_measured"].get<std::size_t>()
       << " runs; the median of each configuration's runs against its "
       << "prediction; each run alone: mean " << fmt(v["single_run_mean_abs_error_pct"], 1)
       << " %, max " << fmt(v["single_run_max_abs_error_pct"], 1) << " %)";
  if (o.sim.seeds > 1)
    md << "; each prediction the median of " << o.sim.seeds << " seeds ("
       << seed_range(o.sim.seed, o.sim.seeds) << ")";
  md << "; profile " << o.profile << "\n";
  for (const auto& x : v["runs_left_out"])
    md << "left out " << x["run"].get<std::string>() << ": " << x["reason"].get<std::string>()
       << "\n";
  if (k.seeded)
    md << n.edge << " configuration(s) whose draws split into regimes (workers in lockstep or "
       << "drifted apart: a run can land in either); " << n.edge_off << " of the " << n.off
       << " off by more than 10% are among them\n";
}

// The host's CPU per worker-step, measured against what the simulation booked, and the
// predictions at the measured CPU (where runs measured it).
void write_host_cpu(std::ostream& md, const nlohmann::json& v, const Profile& profile) {
  const auto& h = v["at_measured_host_cpu"];
  auto pct = [](double x) {
    char text[32];
    std::snprintf(text, sizeof text, "%+.1f%%", x);
    return std::string(text);
  };
  md << "\nThe host's CPU per worker-step, measured (every worker's and shard's process over "
     << "the steady steps) against what the simulation booked on the host's cores";
  if (h["profiled_per_step_ms"].is_number())
    md << " (the profiled run measured " << fmt(h["profiled_per_step_ms"], 2) << " ms, "
       << fmt(h["profiled_busy_cores"], 2) << " of " << profile.host_cpus << " cores busy)";
  md << ":\n";
  constexpr int kListed = 10;
  int measured = 0;  // configurations with the host's CPU measured
  for (const auto& r : v["runs"]) {
    if (!r.contains("host_cpu") || measured++ >= kListed) continue;
    const auto& c = r["host_cpu"];
    md << "- " << run_name(r["run"].get<std::string>()) << ": " << fmt(c["per_step_ms"], 2)
       << " ms against " << fmt(c["simulated_per_step_ms"], 2) << " (x" << fmt(c["ratio"], 2)
       << "), " << fmt(c["busy_cores"], 2) << " of " << c["cores"]
       << " cores busy; at the measured CPU the simulator gives "
       << fmt(c["predicted_images_per_sec"], 0) << " images/s (" << pct(c["error_pct"])
       << "; as profiled " << pct(r["error_pct"]) << ")\n";
  }
  if (measured > kListed)
    md << "- and " << measured - kListed << " more (validation.json: runs[].host_cpu)\n";
  if (measured > 1)
    md << "At each configuration's measured CPU: mean |error| " << fmt(h["mean_abs_error_pct"], 1)
       << " %, max " << fmt(h["max_abs_error_pct"], 1) << " % over " << measured
       << " configuration(s) (as profiled: mean " << fmt(h["as_profiled_mean_abs_error_pct"], 1)
       << " %).\n";
  md << "The simulator charges the profiled run's costs"
     << (profile.contention > 0
             ? ", and where workers + shards outnumber the cores its host's contention (every CPU "
               "cost x up to " +
                   fmt(1 + profile.contention, 2) + ", measured on a crowded run)"
             : std::string())
     << "; a run spends otherwise where its host "
     << "is busier (more busy processes than cores time-shared: context switches, caches; or "
     << "several messages taken per wake-up)"
     << (profile.contention > 0
             ? " than that says"
             : ", which it does not model (psbed profile --contention-run measures it)")
     << ". The figure at the "
     << "measured CPU takes the run's own, so it predicts nothing: it says how much of the "
     << "error is the CPU per step. On a host the run keeps busy, images/s is about its cores "
     << "over the CPU per step, so there that figure follows from the measurement.\n";
}

// `x` with `prec` decimals, or "-" where it is null (a tau of no ranking).
std::string fmt_or_dash(const nlohmann::json& x, int prec) {
  return x.is_number() ? fmt(x.get<double>(), prec) : "-";
}

// A share as "87.5%", or "-" where there is none.
std::string share_text(const nlohmann::json& share) {
  return share.is_number() ? fmt(100 * share.get<double>(), 1) + "%" : "-";
}

// The calibration (predictor/calibration.hpp): how many runs land in their band, how wide the
// bands are, the point errors' tail, and whether the policy predicted best is the one measured
// best; then every configuration with runs outside its band.
void write_calibration(std::ostream& md, const nlohmann::json& v) {
  const auto& c = v["calibration"];
  if (c["runs"].get<std::size_t>() == 0) return;
  md << "\nCalibration: " << c["runs_inside"] << " of " << c["runs"] << " runs ("
     << share_text(c["coverage"]) << ") inside their configuration's band (a "
     << fmt(100 * kBandCoverage, 0) << "% prediction interval of its draws); median band width "
     << fmt(c["median_band_width_pct"], 1) << " % of the predicted median; |error| median "
     << fmt(c["median_abs_error_pct"], 1) << " %, p95 " << fmt(c["p95_abs_error_pct"], 1)
     << " %.\n";
  const std::size_t cells = c["cells"];
  if (cells > 0) {
    md << "Policy cells (configurations alike but for the policy): " << cells
       << "; the policy predicted best measured within " << fmt(kRegretWithinPct, 0)
       << "% of the best in " << share_text(c["cells_regret_within_3pct"])
       << "; median Kendall's tau between predicted and measured "
       << fmt_or_dash(c["median_kendall_tau"], 2) << ".\n";
    for (const auto& cell : c["policy_cells"])
      if (cell["regret_pct"].get<double>() > kRegretWithinPct)
        md << "- " << cell["cell"].get<std::string>() << ": predicted best "
           << cell["predicted_best"].get<std::string>() << ", measured best "
           << cell["measured_best"].get<std::string>() << ", regret " << fmt(cell["regret_pct"], 1)
           << "%, tau " << fmt_or_dash(cell["kendall_tau"], 2) << "\n";
  }
  if (c["outside_band"].empty()) return;
  md << "\nConfigurations with runs outside their band (" << c["outside_band"].size() << "):\n";
  for (const auto& o : c["outside_band"]) {
    // A band a few images/s wide gets a decimal, so that a run just outside it shows so.
    const double low = o["predicted_low"], high = o["predicted_high"];
    const int prec = high - low < 10 ? 1 : 0;
    md << "- " << run_name(o["run"].get<std::string>()) << ": " << o["runs_outside"] << " of "
       << o["runs"] << " outside " << fmt(low, prec) << "-" << fmt(high, prec) << " (measured";
    for (const auto& m : o["measured_runs_images_per_sec"]) md << " " << fmt(m, prec);
    md << ")\n";
  }
}

// Plot: measured points and predicted lines against workers, one colour per policy and mode,
// drawn by plot_validation.py (compiled in from predictor/plot_validation.py, written beside the
// report so it can be run again).
void write_plot(const ValidateOptions& o) {
  const std::string script = o.out + "/plot_validation.py";
  std::ofstream(script) << kPlotValidationPy;
  // A plot left from an earlier report would pass for this one's when no new one is made.
  const std::string png = o.out + "/validation.png";
  std::error_code gone;
  fs::remove(png, gone);
  const ProgramStatus plot = run_program({o.python, script, o.out + "/validation.json", png});
  if (plot.ok())
    std::fprintf(stderr, "plot: %s\n", png.c_str());
  else if (!plot.exited_with(3))  // 3: the script said matplotlib is missing
    std::fprintf(stderr, "no plot written (%s failed; matplotlib: cluster/install-deps.sh plot)\n",
                 o.python.c_str());
}

}  // namespace

int run_validate(const ValidateOptions& given) {
  ValidateOptions o = given;
  while (o.out.size() > 1 && o.out.back() == '/')
    o.out.pop_back();  // report/ names report/validation.json
  const Profile profile = Profile::load(o.profile);
  const ModelSpec spec = profile_model_spec(profile, o.profile);
  nlohmann::json v = validate_into_out(o, profile, spec);
  v["profile"] = o.profile;
  std::ostringstream md;
  const Columns columns = table_columns(v, o.sim.seeds > 1);
  const EdgeCounts edges = write_table(md, v, columns);
  v["regime_edge_configurations"] = edges.edge;
  write_summary(md, v, o, columns, edges);
  if (!v["at_measured_host_cpu"].is_null()) write_host_cpu(md, v, profile);
  write_calibration(md, v);
  write_json(o.out + "/validation.json", v);
  std::ofstream(o.out + "/validation.md") << md.str();
  std::printf("%s", md.str().c_str());
  write_plot(o);
  std::fprintf(stderr, "validation: %s/validation.json, %s/validation.md\n", o.out.c_str(),
               o.out.c_str());
  return 0;
}

}  // namespace psbed::predictor
