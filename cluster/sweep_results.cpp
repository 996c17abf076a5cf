#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>

#include "cluster/plot_sweep_py.hpp"
#include "cluster/sweep_parts.hpp"
#include "core/run_program.hpp"
#include "core/stats.hpp"

namespace psbed::cluster::sweep_detail {

// The nodes a run lost, as "worker-2 (killed by signal 9 (Killed))", comma-separated: the
// summary's failed_nodes (launch's and the coordinator's), and any worker it reports not alive.
std::vector<std::string> lost_nodes(const json& s, bool with_reasons) {
  std::vector<std::string> lost;
  std::set<std::string> named;
  auto add = [&](const json& n, const char* why_key) {
    if (!n.is_object()) return;
    const std::string name =
        n.contains("name") && n["name"].is_string() ? n["name"].get<std::string>() : "?";
    if (!named.insert(name).second) return;
    const std::string why =
        n.contains(why_key) && n[why_key].is_string() ? n[why_key].get<std::string>() : "";
    lost.push_back(with_reasons && !why.empty() ? name + " (" + why + ")" : name);
  };
  if (s.is_object() && s.contains("failed_nodes") && s["failed_nodes"].is_array())
    for (const auto& n : s["failed_nodes"]) add(n, "reason");
  if (s.is_object() && s.contains("per_worker") && s["per_worker"].is_array())
    for (const auto& w : s["per_worker"])
      if (w.is_object() && w.contains("alive") && w["alive"] == false) add(w, "failure");
  return lost;
}
// Why a run is no measurement of its point, or "" when it is one. A run that lost a node ends
// "ok" for launch and the coordinator (the survivors finished), but what it measured is fewer
// workers than its point names: it counts as failed, stays out of tables and plots, and
// --resume runs it again.
std::string run_failure(const json& s) {
  if (!s.is_object()) return "no summary.json";
  const std::vector<std::string> lost = lost_nodes(s, true), names = lost_nodes(s, false);
  if (!s.value("ok", false)) {
    std::string why = s.contains("failure") && s["failure"].is_string()
                          ? s["failure"].get<std::string>()
                          : "the run failed";
    std::vector<std::string> unsaid;  // "coordinator killed by signal 9" names its node already
    for (std::size_t i = 0; i < lost.size(); ++i)
      if (why.find(names[i]) == std::string::npos) unsaid.push_back(lost[i]);
    return unsaid.empty() ? why : why + "; lost " + joined(unsaid, ", ");
  }
  if (!lost.empty()) return "lost " + joined(lost, ", ");
  // An ok summary without its figures (hand-edited, or another program's) measured nothing.
  for (const char* f : {"steps_per_sec", "images_per_sec"})
    if (!s.contains(f) || !s[f].is_number())
      return std::string("summary.json has no number for ") + f;
  return "";
}

bool finished_ok(const json& s) { return run_failure(s).empty(); }

// A CSV field, quoted where it holds a separator or a quote (a failure's reason can).
std::string csv_field(const std::string& v) {
  if (v.find_first_of(",\"\n") == std::string::npos) return v;
  std::string q = "\"";
  for (char c : v) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

const char* const kCsvHeader =
    "run,model,mode,policy,bandwidth,workers,servers,compute,steps,batch,steps_per_sec,images_per_"
    "sec,ok,point,repeat,"
    "steps_done,failed_nodes,failure\n";

// A number of the summary's, or null where it has none (a coordinator killed before it wrote one).
json measured(const json& s, const char* key) {
  return s.is_object() && s.contains(key) && s[key].is_number() ? s[key] : json(nullptr);
}

// A run's row of results.json; `failure` is why it does not count ("" when it does). A failed
// run keeps what it measured (a run past --timeout, say, has its steps so far): ok says whether
// it counts. `steps` is what the point was given (--epochs: what the coordinator made of them),
// steps_done the fewest steps a worker reported.
json result_row(const Point& p, const LaunchOptions& o, const json& s, const std::string& failure) {
  json steps_done = nullptr;
  if (s.is_object() && s.contains("per_worker") && s["per_worker"].is_array())
    for (const auto& w : s["per_worker"])
      if (w.is_object() && w.contains("steps") && w["steps"].is_number_integer() &&
          (steps_done.is_null() || w["steps"].get<std::int64_t>() < steps_done.get<std::int64_t>()))
        steps_done = w["steps"];
  return {{"run", p.folder()},
          {"point", p.name},
          {"repeat", p.repeat},
          {"mode", p.mode},
          {"policy", p.policy},
          {"bandwidth", p.bandwidth.empty() ? "unshaped" : p.bandwidth},
          {"workers", p.workers},
          {"servers", p.servers},
          {"compute", o.compute},
          {"ok", failure.empty()},
          {"steps", o.steps > 0 ? json(o.steps) : measured(s, "steps")},
          {"steps_done", steps_done},
          {"steps_per_sec", measured(s, "steps_per_sec")},
          {"images_per_sec", measured(s, "images_per_sec")},
          {"failed_nodes", lost_nodes(s, false)},
          {"failure", failure.empty() ? json(nullptr) : json(failure)}};
}

// Its row of results.csv: what results.json has, a null left empty.
std::string csv_row(const LaunchOptions& o, const json& r) {
  auto field = [](const json& v) {
    if (v.is_null()) return std::string();
    if (v.is_number_float()) return num(v.get<double>());
    return v.is_string() ? csv_field(v.get<std::string>()) : v.dump();
  };
  std::string line;
  for (const json& v :
       {r["run"], json(o.model), r["mode"], r["policy"], r["bandwidth"], r["workers"], r["servers"],
        json(o.compute), r["steps"], json(o.batch), r["steps_per_sec"], r["images_per_sec"],
        json(r["ok"].get<bool>() ? 1 : 0), r["point"], r["repeat"], r["steps_done"],
        json(joined(r["failed_nodes"].get<std::vector<std::string>>(), " ")), r["failure"]})
    line += (line.empty() ? "" : ",") + field(v);
  return line + "\n";
}
// One table per (bandwidth, mode, servers): a row per worker count, a column per policy, images/s
// (the median of the point's finished runs, with their range when there are several).
void write_markdown(const std::string& path, const json& rows, const SweepOptions& opt,
                    const LaunchOptions& base) {
  std::ofstream md(path);
  md << "# Sweep: " << base.model << ", batch " << base.batch << ", " << base.steps
     << " steps, compute " << base.compute
     << "\n\nImages/s summed over workers (steady state); - = not run; failed = no run of the "
        "point "
     << "counted (the runs that failed are listed below the tables).";
  // The tables cover the runs results.csv has: the grid's, and those a --resume kept from an
  // earlier or larger grid (tables, columns and rows of their own where the grid has none).
  auto label = [](const std::string& b) { return b.empty() ? std::string("unshaped") : b; };
  auto add = [](auto& v, const auto& x) {
    if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
  };
  auto has = [](const auto& v, const auto& x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  std::vector<std::string> bandwidths, modes, policies, grid_bandwidths;
  std::vector<int> servers;
  for (const auto& b : opt.bandwidths) add(grid_bandwidths, label(b));
  for (const auto& b : grid_bandwidths) add(bandwidths, b);
  for (const auto& m : opt.modes) add(modes, m);
  for (const auto& p : opt.policies) add(policies, p);
  for (int s : opt.servers) add(servers, s);
  bool ranges = false;
  std::map<std::string, int> runs_of;  // point -> finished runs
  for (const auto& r : rows) {
    add(bandwidths, r["bandwidth"].get<std::string>()), add(modes, r["mode"].get<std::string>());
    add(policies, r["policy"].get<std::string>()), add(servers, r["servers"].get<int>());
    if (r["ok"].get<bool>()) ranges = ++runs_of[r["point"].get<std::string>()] > 1 || ranges;
  }
  if (ranges) md << " A cell with several runs gives their median, their range in brackets.";
  md << "\n";
  for (const auto& b : bandwidths)
    for (const auto& m : modes)
      for (int sv : servers) {
        const bool grid = has(grid_bandwidths, b) && has(opt.modes, m) && has(opt.servers, sv);
        std::vector<const json*> here;
        for (const auto& r : rows)
          if (r["mode"] == m && r["bandwidth"] == b && r["servers"] == sv) here.push_back(&r);
        if (!grid && here.empty()) continue;
        std::vector<std::string> cols;
        std::vector<int> workers;
        if (grid) workers = opt.workers;
        for (const auto& p : policies) {
          bool used = grid && has(opt.policies, p);
          for (const json* r : here) used = used || (*r)["policy"] == p;
          if (used) cols.push_back(p);
        }
        for (const json* r : here) add(workers, (*r)["workers"].get<int>());
        std::sort(workers.begin(), workers.end());
        md << "\n## " << m << ", " << b << ", " << sv << " server(s)\n\n| workers |";
        for (const auto& p : cols) md << " " << p << " |";
        md << "\n|---:|";
        for (std::size_t i = 0; i < cols.size(); ++i) md << "---:|";
        md << "\n";
        for (int w : workers) {
          md << "| " << w << " |";
          for (const auto& p : cols) {
            std::vector<double> got;
            bool tried = false;
            for (const json* r : here)
              if ((*r)["policy"] == p && (*r)["workers"] == w) {
                tried = true;
                if ((*r)["ok"].get<bool>()) got.push_back((*r)["images_per_sec"].get<double>());
              }
            char buf[96];
            if (got.empty())
              std::snprintf(buf, sizeof buf, tried ? " failed |" : " - |");
            else if (got.size() == 1)
              std::snprintf(buf, sizeof buf, " %.1f |", got[0]);
            else
              std::snprintf(buf, sizeof buf, " %.1f (%.1f-%.1f) |", median(got),
                            *std::min_element(got.begin(), got.end()),
                            *std::max_element(got.begin(), got.end()));
            md << buf;
          }
          md << "\n";
        }
      }
  // A failed run's figures are the steps it did, or the survivors' after a node was lost: listed
  // here with the reason, never in a cell.
  bool header = false;
  for (const auto& r : rows) {
    if (r["ok"].get<bool>()) continue;
    if (!header) md << "\n## Runs that failed\n\n| run | why | measured |\n|---|---|---|\n";
    header = true;
    std::string got = "nothing";
    if (r["images_per_sec"].is_number()) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "%.1f images/s", r["images_per_sec"].get<double>());
      got = buf;
      if (r["steps_done"].is_number()) got += " over " + r["steps_done"].dump() + " steps";
    }
    std::string why = r["failure"].is_string() ? r["failure"].get<std::string>() : "";
    for (std::size_t k = 0; (k = why.find('|', k)) != std::string::npos; k += 2)
      why.replace(k, 1, "\\|");
    md << "| " << r["run"].get<std::string>() << " | " << why << " | " << got << " |\n";
  }
}

void write_results(const SweepOptions& opt, const json& rows) {
  const LaunchOptions& base = opt.base;
  const std::string& out = base.out;
  std::ofstream(out + "/results.json")
      << json{{"model", base.model}, {"compute", base.compute}, {"batch", base.batch},
              {"steps", base.steps}, {"repeat", opt.repeat},    {"runs", rows}}
             .dump(2)
      << "\n";
  write_markdown(out + "/results.md", rows, opt, base);
}

// The plot is drawn by plot_sweep.py, compiled in from cluster/plot_sweep.py and written beside
// the results (where it can be run again), so that an installed psbed plots too.
void plot_results(const std::string& out) {
  const std::string script = out + "/plot_sweep.py";
  std::ofstream(script) << kPlotSweepPy;
  ProgramOptions env;
  env.env = {"PSBED_SWEEP=1"};  // the script leaves a missing matplotlib to the one line below
  const ProgramStatus plot =
      run_program({"/usr/bin/python3", script, out + "/results.csv", out + "/sweep.png"}, env);
  if (plot.exited_with(3))  // the script's word for "no matplotlib"
    spdlog::warn(
        "no plot: matplotlib is not installed (Debian's python3-matplotlib: "
        "cluster/install-deps.sh "
        "plot); later: {}",
        command_text({"python3", script, out + "/results.csv", out + "/sweep.png"}));
  else if (!plot.ok())
    spdlog::warn("no plot: {} failed (its error is above)", script);
  else
    spdlog::info("plot: {}/sweep.png", out);
}

}  // namespace psbed::cluster::sweep_detail
