#include "cluster/sweep.hpp"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cluster/cli_config.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/stats.hpp"
#include "core/policy.hpp"
#include "core/run_program.hpp"
#include "core/units.hpp"
#include "ps/cluster_map.hpp"
#include "ps/link.hpp"
#include "ps/stop_signals.hpp"
#include "worker/net.hpp"

#ifndef PSBED_SOURCE_DIR
#define PSBED_SOURCE_DIR "."
#endif

namespace psbed::cluster {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

struct Point {
  std::string bandwidth, mode, policy;
  int servers = 1, workers = 1;
  std::string name;  // the point's folder under OUT; repeat k > 1 goes to <name>-r<k>
  int repeat = 1;
  std::string folder() const { return repeat == 1 ? name : name + "-r" + std::to_string(repeat); }
};

std::string slug(const std::string& s) {
  std::string out;
  for (char c : s) out += (std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  return out;
}

// A point's link as the sweep names it: "" (unshaped, its folder and rows say so) for an empty
// value, "unshaped", and 0 in any unit, which launch takes for unshaped alike (a 0 named its
// points ...-0-..., beside the default's ...-unshaped-...: one setting under two labels); any
// other rate as given. Throws psbed::Error on a rate that does not parse.
std::string point_bandwidth(const std::string& b) {
  if (b.empty() || b == "unshaped" || parse_bandwidth_bps(b) == 0) return "";
  return b;
}

// Whether two links a sweep names are one rate (1gbit and 1000mbit; 0 and unshaped).
bool same_rate(const std::string& a, const std::string& b) {
  try {
    return (a.empty() ? 0.0 : parse_bandwidth_bps(a)) == (b.empty() ? 0.0 : parse_bandwidth_bps(b));
  } catch (const Error&) {
    return false;
  }
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// The `psbed launch` command line of one point: the policy settings its policy uses (launch says
// so of any other).
std::vector<std::string> launch_args(const LaunchOptions& o) {
  std::vector<std::string> a = {"launch", "--servers", std::to_string(o.servers), "--workers", std::to_string(o.workers),
                                "--model", o.model, "--data", o.data, "--mode", o.mode, "--policy", o.policy,
                                "--epochs", std::to_string(o.epochs), "--steps",
                                std::to_string(o.steps), "--batch", std::to_string(o.batch), "--lr", num(o.lr),
                                "--momentum", num(o.momentum), "--weight-decay", num(o.weight_decay), "--lr-schedule",
                                o.lr_schedule, "--seed", std::to_string(o.seed), "--partition-bytes", o.partition_bytes,
                                "--threads", std::to_string(o.threads), "--apply-threads",
                                std::to_string(o.apply_threads), "--device", o.device, "--compute", o.compute,
                                "--out", o.out, "--heartbeat", num(o.heartbeat_s), "--heartbeat-timeout",
                                num(o.heartbeat_timeout_s), "--timeout", num(o.timeout_s)};
  if (!o.data_dir.empty()) a.insert(a.end(), {"--data-dir", o.data_dir});
  if (policy::uses_slice_params(o.policy)) a.insert(a.end(), {"--slice-params", std::to_string(o.slice_params)});
  if (policy::uses_partition_params(o.policy))
    a.insert(a.end(), {"--partition-params", std::to_string(o.partition_params)});
  if (!o.credit.empty() && policy::uses_credit(o.policy)) a.insert(a.end(), {"--credit", o.credit});
  if (!o.bandwidth.empty()) a.insert(a.end(), {"--bandwidth", o.bandwidth});
  if (!o.latency.empty()) a.insert(a.end(), {"--latency", o.latency});
  if (o.netns) a.push_back("--netns");
  if (!o.trace) a.push_back("--no-trace");
  return a;
}

// The policy settings: a point gets only those its policy uses, so they are no shared setting;
// --resume compares them with what each kept run's summary says it was given (policy_changes).
const char* const kPolicyFlags[] = {"--slice-params", "--partition-params", "--credit"};

// The launch flags every point of a sweep shares, flag -> value ("" for a switch): launch_args
// less a point's own (servers, workers, mode, policy, bandwidth, the policy's settings) and its
// --out. Recorded in OUT/sweep-settings.json, so that --resume keeps finished points only under
// the same ones.
std::map<std::string, std::string> shared_flags(const LaunchOptions& o) {
  const std::vector<std::string> a = launch_args(o);
  std::map<std::string, std::string> m;
  for (std::size_t i = 1; i < a.size(); ++i) {
    if (a[i].rfind("--", 0) != 0) continue;
    const bool valued = i + 1 < a.size() && a[i + 1].rfind("--", 0) != 0;
    m[a[i]] = valued ? a[i + 1] : "";
  }
  for (const char* own : {"--servers", "--workers", "--mode", "--policy", "--bandwidth", "--out", "--timeout"})
    m.erase(own);
  for (const char* own : kPolicyFlags) m.erase(own);
  if (o.steps > 0) m.erase("--epochs");  // --steps decides the run's length
  // Values as they act, not as they were spelt: 4MiB and 4mib, 200us and 0.2ms, a model's path
  // and its name (as summary.json gives it), a folder and its relative form are each one setting.
  auto canonical = [](const std::string& path) {
    std::error_code ec;
    const fs::path c = fs::weakly_canonical(path, ec);
    return ec ? path : c.string();
  };
  for (auto& [flag, value] : m) {
    if (flag == "--model") value = load_model(value).name;
    else if (flag == "--partition-bytes") value = std::to_string(parse_bytes(value));
    else if (flag == "--latency") value = num(parse_duration_s(value)) + "s";
    else if (flag == "--data-dir") value = canonical(value);
    else if (flag == "--compute" && value.rfind("replay:", 0) == 0) value = "replay:" + canonical(value.substr(7));
  }
  return m;
}

// Runs `psbed launch` for one point, its output into LOG. Returns its exit status (130: Ctrl-C,
// or a closed terminal). A stop the sweep takes meanwhile (Ctrl-C, SIGTERM or a hang-up sent to
// the sweep alone: `kill PID`, not the terminal's whole group) reaches the launch as well: it
// winds its cluster down and keeps what it measured, and the sweep stops after it with what it
// has. (A launch signalled twice within a moment, by the terminal and by this, takes it as one
// interruption.) The launch is signalled only before it is reaped: its pid is never another's.
int run_launch_child(const std::vector<std::string>& args, const std::string& log, ps::BlockedStopSignals& stops) {
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) throw Error("fork failed");
  if (pid == 0) {
    // The launch takes SIGINT and SIGTERM itself, even where the sweep was started ignoring them.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    sigprocmask(SIG_SETMASK, &stops.old_mask(), nullptr);
    if (::getppid() != parent) ::_exit(1);
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) ::dup2(fd, STDOUT_FILENO), ::dup2(fd, STDERR_FILENO), ::close(fd);
    std::vector<char*> argv = {const_cast<char*>("/proc/self/exe")};
    for (const auto& s : args) argv.push_back(const_cast<char*>(s.c_str()));
    argv.push_back(nullptr);
    ::execv("/proc/self/exe", argv.data());
    ::_exit(127);
  }
  int status = 0;
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid || (done < 0 && errno != EINTR)) break;
    const int sig = stops.wait(0.5);  // SIGCHLD, a stop, or a look again
    if (stops.is_stop(sig)) ::kill(pid, sig);
  }
  while (stops.poll() != 0) {  // a stop that came as it ended counts for it
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

// Where an earlier failed run of FOLDER goes: <folder>.failed/, then .failed-2/, .failed-3/, ...
// after the latest one there, so every attempt stays (a point that fails each time may fail
// for other reasons) and their numbers follow their order.
std::string failed_aside(const std::string& folder) {
  const fs::path path(folder);
  const std::string first = path.filename().string() + ".failed";
  int last = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(path.parent_path(), ec)) {
    const std::string name = e.path().filename().string();
    if (name == first) last = std::max(last, 1);
    if (name.size() > first.size() + 1 && name.compare(0, first.size() + 1, first + "-") == 0) {
      const std::string k = name.substr(first.size() + 1);
      if (k.size() < 9 && std::all_of(k.begin(), k.end(), [](char c) { return c >= '0' && c <= '9'; }))
        last = std::max(last, std::stoi(k));
    }
  }
  return last == 0 ? folder + ".failed" : folder + ".failed-" + std::to_string(last + 1);
}

bool has_value(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::string hms(double s) {
  char buf[32];
  const int t = int(s + 0.5);
  std::snprintf(buf, sizeof buf, "%dm%02ds", t / 60, t % 60);
  return buf;
}

// What a finished run's summary says it ran with, where that differs from the sweep's settings
// `o` (model, batch, steps, compute, learning rate): "20 steps, not 40", or "" if nothing does.
std::string settings_differ(const json& s, const LaunchOptions& o) {
  std::string d;
  auto add = [&](const std::string& what) { d += (d.empty() ? "" : ", ") + what; };
  const std::string model = load_model(o.model).name;  // what summary.json says: the spec's name
  if (s.value("model", model) != model) add("model " + s.value("model", std::string()) + ", not " + model);
  if (s.value("batch", o.batch) != o.batch)
    add("batch " + std::to_string(s.value("batch", 0)) + ", not " + std::to_string(o.batch));
  if (o.steps > 0 && s.value("steps", o.steps) != o.steps)
    add(std::to_string(s.value("steps", std::int64_t(0))) + " steps, not " + std::to_string(o.steps));
  if (s.value("compute", o.compute) != o.compute)
    add("compute " + s.value("compute", std::string()) + ", not " + o.compute);
  const double lr = s.value("lr", double(o.lr));
  // Sweeps pass the rate on with six digits (num): equal within that.
  if (std::abs(lr - double(o.lr)) > 1e-5 * std::abs(double(o.lr)) + 1e-12) add("lr " + num(lr) + ", not " + num(o.lr));
  return d;
}

// What a kept run of `policy` was given of the settings that policy uses, where this sweep would
// give it otherwise (values as they act: a default credit and the same number of bytes are
// one): "--credit 1.00 MiB (now 4.00 MiB)" each, or none. `was` is the run's summary's
// policy_options; a run without them (an older launch) is not compared.
std::vector<std::string> policy_changes(const std::string& policy, const json& was, const LaunchOptions& o) {
  std::vector<std::string> d;
  if (!was.is_object()) return d;
  auto number = [&](const char* key) -> std::optional<std::int64_t> {
    if (!was.contains(key) || !was[key].is_number_integer()) return std::nullopt;
    return was[key].get<std::int64_t>();
  };
  auto compare = [&](const char* flag, const char* key, std::int64_t now) {
    const auto before = number(key);
    if (before && *before != now) d.push_back(std::string(flag) + " " + std::to_string(*before) + " (now " + std::to_string(now) + ")");
  };
  if (policy::uses_slice_params(policy)) compare("--slice-params", "slice_params", o.slice_params);
  if (policy::uses_partition_params(policy)) compare("--partition-params", "partition_params", o.partition_params);
  if (policy::uses_credit(policy) && number("credit_bytes")) {
    policy::PolicyOptions before, now;
    before.name = now.name = policy;
    before.credit_bytes = *number("credit_bytes");
    now.credit_bytes = o.credit.empty() ? -1 : std::int64_t(parse_bytes(o.credit));
    const std::int64_t b = policy::credit_in_effect(before), n = policy::credit_in_effect(now);
    auto said = [&](std::int64_t bytes, bool by_default) {
      return format_bytes(double(bytes)) + (by_default ? ", " + policy + "'s default" : "");
    };
    if (b != n)
      d.push_back("--credit " + said(b, before.credit_bytes < 0) + " (now " + said(n, now.credit_bytes < 0) + ")");
  }
  return d;
}

json read_summary(const std::string& path) {
  std::ifstream in(path);
  if (!in) return json();
  try {
    return json::parse(in);
  } catch (const json::exception&) {
    return json();
  }
}

// The nodes a run lost, as "worker-2 (killed by signal 9 (Killed))", comma-separated: the
// summary's failed_nodes (launch's and the coordinator's), and any worker it reports not alive.
std::vector<std::string> lost_nodes(const json& s, bool with_reasons) {
  std::vector<std::string> lost;
  std::set<std::string> named;
  auto add = [&](const json& n, const char* why_key) {
    if (!n.is_object()) return;
    const std::string name = n.contains("name") && n["name"].is_string() ? n["name"].get<std::string>() : "?";
    if (!named.insert(name).second) return;
    const std::string why = n.contains(why_key) && n[why_key].is_string() ? n[why_key].get<std::string>() : "";
    lost.push_back(with_reasons && !why.empty() ? name + " (" + why + ")" : name);
  };
  if (s.is_object() && s.contains("failed_nodes") && s["failed_nodes"].is_array())
    for (const auto& n : s["failed_nodes"]) add(n, "reason");
  if (s.is_object() && s.contains("per_worker") && s["per_worker"].is_array())
    for (const auto& w : s["per_worker"])
      if (w.is_object() && w.contains("alive") && w["alive"] == false) add(w, "failure");
  return lost;
}

std::string joined(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : sep) + i;
  return out;
}

// Why a run is no measurement of its point, or "" when it is one. A run that lost a node ends
// "ok" for launch and the coordinator (the survivors finished), but what it measured is fewer
// workers than its point names: it counts as failed, stays out of tables and plots, and
// --resume runs it again.
std::string run_failure(const json& s) {
  if (!s.is_object()) return "no summary.json";
  const std::vector<std::string> lost = lost_nodes(s, true), names = lost_nodes(s, false);
  if (!s.value("ok", false)) {
    std::string why = s.contains("failure") && s["failure"].is_string() ? s["failure"].get<std::string>() : "the run failed";
    std::vector<std::string> unsaid;  // "coordinator killed by signal 9" names its node already
    for (std::size_t i = 0; i < lost.size(); ++i)
      if (why.find(names[i]) == std::string::npos) unsaid.push_back(lost[i]);
    return unsaid.empty() ? why : why + "; lost " + joined(unsaid, ", ");
  }
  if (!lost.empty()) return "lost " + joined(lost, ", ");
  // An ok summary without its figures (hand-edited, or another program's) measured nothing.
  for (const char* f : {"steps_per_sec", "images_per_sec"})
    if (!s.contains(f) || !s[f].is_number()) return std::string("summary.json has no number for ") + f;
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

const char* kCsvHeader =
    "run,model,mode,policy,bandwidth,workers,servers,compute,steps,batch,steps_per_sec,images_per_sec,ok,point,repeat,"
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
  return {{"run", p.folder()}, {"point", p.name}, {"repeat", p.repeat}, {"mode", p.mode}, {"policy", p.policy},
          {"bandwidth", p.bandwidth.empty() ? "unshaped" : p.bandwidth}, {"workers", p.workers},
          {"servers", p.servers}, {"compute", o.compute}, {"ok", failure.empty()},
          {"steps", o.steps > 0 ? json(o.steps) : measured(s, "steps")}, {"steps_done", steps_done},
          {"steps_per_sec", measured(s, "steps_per_sec")}, {"images_per_sec", measured(s, "images_per_sec")},
          {"failed_nodes", lost_nodes(s, false)}, {"failure", failure.empty() ? json(nullptr) : json(failure)}};
}

// Its row of results.csv: what results.json has, a null left empty.
std::string csv_row(const LaunchOptions& o, const json& r) {
  auto field = [](const json& v) {
    if (v.is_null()) return std::string();
    if (v.is_number_float()) return num(v.get<double>());
    return v.is_string() ? csv_field(v.get<std::string>()) : v.dump();
  };
  std::string line;
  for (const json& v : {r["run"], json(o.model), r["mode"], r["policy"], r["bandwidth"], r["workers"], r["servers"],
                        json(o.compute), r["steps"], json(o.batch), r["steps_per_sec"], r["images_per_sec"],
                        json(r["ok"].get<bool>() ? 1 : 0), r["point"], r["repeat"], r["steps_done"],
                        json(joined(r["failed_nodes"].get<std::vector<std::string>>(), " ")), r["failure"]})
    line += (line.empty() ? "" : ",") + field(v);
  return line + "\n";
}

// The finished runs in a sweep's folder, by folder name (<mode>-<policy>-<bandwidth>-<S>s<N>w,
// and -r<K> for a repeat), in name order; failed ones (and <point>.failed/) left out.
std::map<std::string, Point> finished_points(const std::string& out) {
  static const std::regex folder(R"(^([^-]+)-(.+)-([^-]+)-(\d{1,6})s(\d{1,6})w(?:-r(\d{1,6}))?$)");
  std::map<std::string, Point> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(out, ec)) {
    const std::string name = e.path().filename().string();
    std::smatch m;
    if (!e.is_directory(ec) || !std::regex_match(name, m, folder)) continue;
    const json s = read_summary((e.path() / "summary.json").string());
    if (!finished_ok(s)) continue;
    Point p;
    p.mode = s.value("mode", m[1].str());
    p.policy = m[2];
    p.bandwidth = same_rate(m[3], "") || m[3] == "unshaped" ? "" : m[3].str();  // 0 from before it was unshaped
    p.servers = std::stoi(m[4]), p.workers = std::stoi(m[5]);
    p.repeat = m[6].matched ? std::stoi(m[6]) : 1;
    p.name = p.repeat == 1 ? name : name.substr(0, name.size() - m[6].length() - 2);
    found.emplace(name, p);
  }
  return found;
}

// One table per (bandwidth, mode, servers): a row per worker count, a column per policy, images/s
// (the median of the point's finished runs, with their range when there are several).
void write_markdown(const std::string& path, const json& rows, const SweepOptions& opt, const LaunchOptions& base) {
  std::ofstream md(path);
  md << "# Sweep: " << base.model << ", batch " << base.batch << ", " << base.steps << " steps, compute "
     << base.compute << "\n\nImages/s summed over workers (steady state); - = not run; failed = no run of the point "
     << "counted (the runs that failed are listed below the tables).";
  // The tables cover the runs results.csv has: the grid's, and those a --resume kept from an
  // earlier or larger grid (tables, columns and rows of their own where the grid has none).
  auto label = [](const std::string& b) { return b.empty() ? std::string("unshaped") : b; };
  auto add = [](auto& v, const auto& x) {
    if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
  };
  auto has = [](const auto& v, const auto& x) { return std::find(v.begin(), v.end(), x) != v.end(); };
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
                            *std::min_element(got.begin(), got.end()), *std::max_element(got.begin(), got.end()));
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
    for (std::size_t k = 0; (k = why.find('|', k)) != std::string::npos; k += 2) why.replace(k, 1, "\\|");
    md << "| " << r["run"].get<std::string>() << " | " << why << " | " << got << " |\n";
  }
}

}  // namespace

void add_sweep(CLI::App& root, SweepOptions& o, std::string& log_level) {
  auto* app = root.add_subcommand("sweep", "Run a grid of cluster launches into one folder, with results.csv and a plot");
  app->footer(
      "Example: psbed sweep --model vgg-mini --data synthetic --workers 1,2,4,8 --policy all --mode bsp,async \\\n"
      "           --bandwidth 1gbit --compute replay:profile.json --steps 30 --out runs/sweep-NAME\n"
      "Each point is a `psbed launch` into OUT/<mode>-<policy>-<bandwidth>-<S>s<N>w/ (its output in launch.log);\n"
      "with --repeat K its repeats go to <point>-r2/ ... <point>-rK/, one round of the grid after the other.\n"
      "OUT/results.csv and results.json get one row per run (images/s, steps/s, ok), results.md a table per mode\n"
      "and bandwidth (the median of each point's runs); a run that failed or lost a node (killed or stopped) has\n"
      "ok 0, failed_nodes and failure beside what it measured, and stays out of results.md's cells and the plot.\n"
      "OUT/sweep.png plots "
      "images/s against workers, a line per policy (matplotlib: cluster/install-deps.sh plot). Ctrl-C (or SIGTERM\n"
      "to the sweep alone) stops the run in flight and the sweep, keeping what finished; --resume keeps finished runs on a second call\n"
      "(in every results file, those outside its grid too) and runs the others again (each failed attempt kept as <point>.failed/, .failed-2/, ...), so\n"
      "--resume --repeat 3 adds two repeats to a finished sweep. A short run can settle in one of two paces\n"
      "(workers in step or out of step on a shared link): repeats show it, and `psbed validate` compares a\n"
      "prediction with the median of a point's repeats.");
  add_config_option(app);
  app->add_option("--log-level", log_level, "trace, debug, info, warn or error")->capture_default_str();
  LaunchOptions& b = o.base;
  app->add_option("--workers", o.workers, "worker counts, e.g. 1,2,4,8")->delimiter(',')->capture_default_str();
  app->add_option("--servers", o.servers, "server shard counts")->delimiter(',')->capture_default_str();
  app->add_option("--policy", o.policies, "policies, or all")->delimiter(',')->capture_default_str();
  app->add_option("--mode", o.modes, "consistency modes: async, bsp, ssp:K")->delimiter(',')->capture_default_str();
  app->add_option("--bandwidth", o.bandwidths,
                  "link rates per direction, e.g. 100mbit,1gbit; 0 or unshaped: unshaped (the default), as in 0,1gbit")
      ->delimiter(',')
      ->check(CLI::Validator(
          [](std::string& v) {
            try {
              point_bandwidth(v);
            } catch (const Error& e) {
              return std::string(e.what());
            }
            return std::string();
          },
          "RATE"));
  app->add_option("--out", b.out, "folder for every run, results.csv, results.json and sweep.png")->required();
  app->add_option("--repeat", o.repeat, "runs per point (median and range in results.md, validate uses the median)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  app->add_flag("--resume", o.resume,
                "keep runs that already finished in OUT (refused where one ran with other settings; a policy's "
                "settings count for the kept runs of the policies this call runs)");
  app->add_flag("!--no-plot", o.plot, "skip sweep.png");
  app->add_option("--model", b.model, "model name or .toml path")->capture_default_str();
  app->add_option("--data", b.data, "mnist or synthetic")->capture_default_str();
  app->add_option("--data-dir", b.data_dir, "directory with IDX files");
  app->add_option("--compute", b.compute, "real, or replay:<profile.json> (how 8+ workers fit on a small machine)")
      ->capture_default_str();
  app->add_option("--steps", b.steps, "steps per worker per run")->capture_default_str();
  app->add_option("--epochs", b.epochs, "passes over the data per run (when --steps is 0)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app->add_option("--batch", b.batch, "batch per worker")->capture_default_str();
  app->add_option("--lr", b.lr, "learning rate, constant over each run (a sweep measures throughput; launch's own default schedule is cosine)")
      ->capture_default_str()
      ->check(non_negative("a learning rate", true));
  app->add_option("--threads", b.threads, "compute threads per worker")->capture_default_str();
  app->add_option("--device", b.device, "cpu or gpu (every worker of every run)")->capture_default_str();
  app->add_option("--apply-threads", b.apply_threads, "threads applying updates per server shard")
      ->capture_default_str()->check(CLI::Range(1, 1024));
  app->add_option("--seed", b.seed, "seed")->capture_default_str()->transform(seed_validator());
  app->add_option("--partition-bytes", b.partition_bytes, "largest part a tensor is cut into")->capture_default_str()
      ->check(size_value());
  app->add_option("--slice-params", b.slice_params, "p3, prophet: parameters per slice")->capture_default_str();
  app->add_option("--partition-params", b.partition_params, "bytescheduler: parameters per partition")->capture_default_str();
  app->add_option("--credit", b.credit, "p3/bytescheduler credit, prophet block limit (default, or 'default': each policy's)")
      ->transform(credit_value());
  app->add_option("--latency", b.latency, "emulated one-way latency of every link, e.g. 200us")->check(duration_value());
  app->add_flag("--netns", b.netns, "shape with tc in one network namespace per node (root) instead of in-process");
  app->add_option("--timeout", b.timeout_s, "seconds each run may take")->capture_default_str();
  app->add_flag("!--no-trace", b.trace, "do not write traces");
}

int run_sweep(SweepOptions opt) {
  LaunchOptions& base = opt.base;
  if (base.out.empty()) throw Error("--out is required: the folder that receives every run and results.csv");
  if (opt.policies.size() == 1 && opt.policies[0] == "all") opt.policies = policy::policy_names();
  // Every value is checked before the first run, so a typo does not surface an hour in.
  for (const auto& p : opt.policies) {
    policy::PolicyOptions po;
    po.name = p;
    policy::check_policy_options(po);
  }
  for (const auto& m : opt.modes) ps::Consistency::parse(m);
  // A GPU sweep on a machine without one fails here once, not at every point.
  worker::require_device(base.device);
  for (auto& b : opt.bandwidths) b = point_bandwidth(b);
  for (const auto& b : opt.bandwidths) ps::parse_link(b, base.latency);
  for (int w : opt.workers)
    if (w < 1) throw Error("--workers: every count must be at least 1, got " + std::to_string(w));
  for (int s : opt.servers)
    if (s < 1) throw Error("--servers: every count must be at least 1, got " + std::to_string(s));
  if (opt.workers.empty() || opt.servers.empty() || opt.policies.empty() || opt.modes.empty() || opt.bandwidths.empty())
    throw Error("the grid is empty: give at least one value to --workers, --servers, --policy, --mode, --bandwidth");
  // A value given twice would run its points twice into one folder (the second taking the first
  // for a failed run) and double their rows: --repeat is how a point runs again.
  const std::string again = " (to run a point again, use --repeat)";
  require_distinct("--workers", opt.workers, again);
  require_distinct("--servers", opt.servers, again);
  require_distinct("--policy", opt.policies, again);
  require_distinct("--mode", opt.modes, again);
  {
    std::vector<double> rates;  // 100mbit and 100Mbit, 1gbit and 1000mbit are one link
    for (const auto& b : opt.bandwidths) rates.push_back(b.empty() ? 0.0 : parse_bandwidth_bps(b));
    std::sort(rates.begin(), rates.end());
    if (std::adjacent_find(rates.begin(), rates.end()) != rates.end())
      throw Error("--bandwidth gives one rate twice (0 and unshaped are one; to run a point again, use --repeat)");
  }

  // --resume finds a point's runs where an earlier sweep spelt its link otherwise (0 before it
  // was named unshaped, 1000mbit for 1gbit): one rate, one point, kept rather than run again.
  std::map<std::string, Point> earlier;
  if (opt.resume) earlier = finished_points(base.out);
  std::vector<Point> grid;
  for (const auto& b : opt.bandwidths)
    for (const auto& m : opt.modes)
      for (const auto& p : opt.policies)
        for (int s : opt.servers)
          for (int w : opt.workers) {
            Point pt{b, m, p, s, w, "", 1};
            pt.name = slug(m) + "-" + p + "-" + (b.empty() ? "unshaped" : b) + "-" + std::to_string(s) + "s" +
                      std::to_string(w) + "w";
            std::error_code ec;  // an --out that cannot be read is named below
            if (!fs::exists(base.out + "/" + pt.name, ec))
              for (const auto& [folder, q] : earlier)
                if (q.policy == p && q.servers == s && q.workers == w && q.name.rfind(slug(m) + "-", 0) == 0 &&
                    same_rate(q.bandwidth, b)) {
                  pt.name = q.name;
                  break;
                }
            grid.push_back(pt);
          }
  // Repeats go round the whole grid again rather than one point K times in a row, so a slow
  // spell of the machine is spread over the points instead of landing on one.
  if (opt.repeat < 1) throw Error("--repeat must be at least 1, got " + std::to_string(opt.repeat));
  const std::size_t points = grid.size();
  for (int k = 2; k <= opt.repeat; ++k)
    for (std::size_t i = 0; i < points; ++i) {
      Point pt = grid[i];
      pt.repeat = k;
      grid.push_back(pt);
    }
  const std::string out = base.out;
  {
    LaunchOptions first = base;  // the settings every point shares, refused before any run
    first.workers = grid.front().workers, first.servers = grid.front().servers;
    first.mode = grid.front().mode, first.policy = grid.front().policy, first.bandwidth = grid.front().bandwidth;
    // The most shards any point asks for: each must hold a part of the model.
    first.servers = *std::max_element(opt.servers.begin(), opt.servers.end());
    check_launch_options(first);
  }
  ensure_writable_dir(out, "--out");
  if (!opt.resume && fs::exists(out + "/results.csv"))
    throw Error("--out " + out + " holds a sweep already (results.csv): --resume continues it, or give another --out");
  // --resume keeps a finished point only if it ran with this sweep's settings; one that did not
  // is refused here, before anything runs (its results would be labelled with settings it did
  // not have).
  // Every finished run in the folder counts, the grid's and those outside it that stay in the
  // results after its rows.
  std::map<std::string, Point> kept;
  if (opt.resume) kept = finished_points(out);
  for (const auto& [name, p] : kept) {
    const std::string differs = settings_differ(read_summary(out + "/" + name + "/summary.json"), base);
    if (!differs.empty())
      throw Error("--resume: " + out + "/" + name + " ran with " + differs +
                  ": give the sweep's earlier settings, or another --out");
  }
  // And every other setting the points share, as the sweep that made them recorded it.
  const std::string settings_path = out + "/sweep-settings.json";
  const std::map<std::string, std::string> settings = shared_flags(base);
  // A sweep made before this record has none: its finished points were checked only by
  // settings_differ above, so no record is made for it (it would vouch for settings unchecked).
  bool record = true;
  if (opt.resume && !fs::exists(settings_path) && !kept.empty()) record = false;
  if (opt.resume) {
    const json before = read_summary(settings_path);
    if (before.is_object()) {
      // A flag's value, "on" for a switch, "not given" where absent.
      auto said = [](bool has, const std::string& v) { return !has ? std::string("not given") : v.empty() ? std::string("on") : v; };
      std::map<std::string, std::pair<std::string, std::string>> change;  // flag -> (was, now)
      for (const auto& [flag, value] : settings) {
        const bool had = before.contains(flag) && before[flag].is_string();
        const std::string was = had ? before[flag].get<std::string>() : "";
        if (!had || was != value) change[flag] = {said(had, was), said(true, value)};
      }
      for (const auto& [flag, was] : before.items()) {
        // An older sweep recorded the policy settings as shared: they are compared below, per run.
        const bool policy_flag = std::any_of(std::begin(kPolicyFlags), std::end(kPolicyFlags),
                                             [&, &flag = flag](const char* f) { return flag == f; });
        if (!settings.count(flag) && was.is_string() && !policy_flag)
          change[flag] = {said(true, was.get<std::string>()), "not given"};
      }
      std::string differs;
      for (const auto& [flag, wn] : change)
        differs += (differs.empty() ? "" : ", ") + flag + " " + wn.first + " (now " + wn.second + ")";
      if (!differs.empty())
        throw Error("--resume: the sweep in " + out + " ran with " + differs +
                    ": give its earlier settings, or another --out");
    }
    // The policy settings, for the runs kept whose policy this sweep runs and uses them (a kept
    // run of a policy it does not run is given nothing by it): each as its summary says it was.
    std::map<std::string, std::vector<std::string>> runs_by_change;  // "--credit 1 MiB (now 4 MiB)" -> runs
    for (const auto& [name, p] : finished_points(out)) {
      if (!has_value(opt.policies, p.policy)) continue;
      const json s = read_summary(out + "/" + name + "/summary.json");
      for (const auto& c : policy_changes(p.policy, s.value("policy_options", json()), base))
        runs_by_change[c].push_back(name);
    }
    std::string differs;
    for (const auto& [change, runs] : runs_by_change)
      differs += (differs.empty() ? "" : "; ") + change + " in " + runs.front() +
                 (runs.size() > 1 ? " and " + std::to_string(runs.size() - 1) + " other run(s)" : "");
    if (!differs.empty())
      throw Error("--resume: the sweep in " + out + " ran with " + differs +
                  ": give its earlier settings, or another --out");
  }
  if (record) std::ofstream(settings_path) << json(settings).dump(1) << "\n";
  spdlog::info("sweep of {} runs ({} points x {} repeat(s)) of {} into {} ({} compute)", grid.size(), points,
               opt.repeat, base.model, out, base.compute);

  // The sweep outlives Ctrl-C: the launch in flight gets it too (from the terminal, or from
  // run_launch_child when only the sweep was signalled), stops its cluster and exits 130, after
  // which the sweep stops with what it has. So on SIGTERM, and on a closed terminal (SIGHUP,
  // unless the sweep runs under nohup): the launch winds down, the sweep writes its results.
  std::optional<ps::BlockedStopSignals> stops;
  stops.emplace(true, std::initializer_list<int>{SIGCHLD});

  std::ofstream csv(out + "/results.csv");
  csv << kCsvHeader;
  json rows = json::array();
  const auto t0 = std::chrono::steady_clock::now();
  int done = 0, failed = 0, ran = 0;
  bool interrupted = false;
  for (const Point& p : grid) {
    while (stops->poll() != 0) {
    }
    if (stops->received() != 0) {  // between two launches
      interrupted = true;
      spdlog::warn("interrupted ({}): stopping the sweep before {}", strsignal(stops->received()), p.folder());
      break;
    }
    LaunchOptions o = base;
    o.workers = p.workers, o.servers = p.servers, o.mode = p.mode, o.policy = p.policy, o.bandwidth = p.bandwidth;
    o.out = out + "/" + p.folder();
    json s;
    std::string failure;
    if (opt.resume && finished_ok(s = read_summary(o.out + "/summary.json"))) {
      spdlog::info("[{}/{}] {}: kept (finished earlier)", done + 1, grid.size(), p.folder());
    } else {
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::string eta;
      if (ran > 0) eta = ", about " + hms(elapsed / ran * double(grid.size() - done)) + " left";
      const std::string rep = opt.repeat > 1 ? ", repeat " + std::to_string(p.repeat) : "";
      spdlog::info("[{}/{}] {} {} {} {} server(s) {} worker(s){} ... (elapsed {}{})", done + 1, grid.size(), p.mode,
                   p.policy, p.bandwidth.empty() ? "unshaped" : p.bandwidth, p.servers, p.workers, rep, hms(elapsed),
                   eta);
      if (fs::exists(o.out)) {  // a failed run of this point (--resume): kept beside, not overwritten
        const std::string aside = failed_aside(o.out);
        fs::rename(o.out, aside);
        spdlog::info("{}: the earlier failed run moved to {}", p.folder(), aside);
      }
      fs::create_directories(o.out);
      const int rc = run_launch_child(launch_args(o), o.out + "/launch.log", *stops);
      ++ran;
      s = read_summary(o.out + "/summary.json");
      if (rc == 130 || (stops->received() != 0 && rc != 0)) {
        interrupted = true;
        spdlog::warn("interrupted during {}: stopping the sweep", p.folder());
        break;
      }
      failure = run_failure(s);
      if (failure.empty() && rc != 0) failure = "launch exited with status " + std::to_string(rc);
      if (!failure.empty()) {
        ++failed;
        // What it measured is said, so a survivors' figure is seen for what it is, and not counted.
        std::string measured;
        if (s.is_object() && s.value("images_per_sec", 0.0) > 0)
          measured = fmt::format(" ({:.1f} images/s measured, not counted)", s.value("images_per_sec", 0.0));
        spdlog::error("[{}/{}] {} failed: {}{}; see {}/launch.log", done + 1, grid.size(), p.folder(), failure,
                      measured, o.out);
      } else {
        // With repeats: the point's earlier runs beside this one, so a second pace shows at once.
        std::string others;
        for (const auto& r : rows)
          if (r["point"] == p.name && r["ok"].get<bool>()) {
            char buf[32];
            std::snprintf(buf, sizeof buf, "%s%.1f", others.empty() ? "" : ", ", r["images_per_sec"].get<double>());
            others += buf;
          }
        spdlog::info("[{}/{}] {}: {:.1f} images/s, {:.2f} steps/s{}", done + 1, grid.size(), p.folder(),
                     s.value("images_per_sec", 0.0), s.value("steps_per_sec", 0.0),
                     others.empty() ? "" : " (earlier repeats: " + others + ")");
      }
    }
    rows.push_back(result_row(p, o, s, failure));
    csv << csv_row(o, rows.back()) << std::flush;
    ++done;
  }
  // --resume with a smaller or another grid, or stopped before the end: the finished runs in
  // OUT that this call did not visit stay in the results, after its own rows (read from their
  // folders, which --resume checked were run with this sweep's settings).
  if (opt.resume) {
    std::set<std::string> visited;
    for (const auto& r : rows) visited.insert(r["run"].get<std::string>());
    std::vector<std::string> carried;
    for (auto [name, p] : finished_points(out)) {
      if (visited.count(name)) continue;
      // One rate, one label: a folder an earlier sweep named 1000mbit (or 0) is labelled as this
      // call names the rate (1gbit, unshaped).
      for (const auto& b : opt.bandwidths)
        if (same_rate(p.bandwidth, b)) p.bandwidth = b;
      LaunchOptions o = base;
      const json s = read_summary(out + "/" + name + "/summary.json");
      rows.push_back(result_row(p, o, s, ""));  // finished_points holds only runs that count
      csv << csv_row(o, rows.back());
      carried.push_back(name);
    }
    csv.flush();
    if (!carried.empty()) {
      std::string names;
      for (std::size_t i = 0; i < carried.size() && i < 4; ++i) names += (i ? ", " : "") + carried[i];
      if (carried.size() > 4) names += ", ...";
      spdlog::info("kept {} finished run(s) this call did not visit in the results ({})", carried.size(), names);
    }
  }
  stops.reset();
  std::ofstream(out + "/results.json") << json{{"model", base.model}, {"compute", base.compute}, {"batch", base.batch},
                                               {"steps", base.steps}, {"repeat", opt.repeat}, {"runs", rows}}
                                              .dump(2)
                                       << "\n";
  write_markdown(out + "/results.md", rows, opt, base);
  spdlog::info("{} of {} runs done ({} failed) in {}: {}/results.csv", done, grid.size(), failed,
               hms(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()), out);
  if (opt.plot && done > 0) {
    const std::string script = std::string(PSBED_SOURCE_DIR) + "/cluster/plot_sweep.py";
    ProgramOptions env;
    env.env = {"PSBED_SWEEP=1"};  // the script leaves a missing matplotlib to the one line below
    const ProgramStatus plot =
        run_program({"/usr/bin/python3", script, out + "/results.csv", out + "/sweep.png"}, env);
    if (plot.exited_with(3))  // the script's word for "no matplotlib"
      spdlog::warn("no plot: matplotlib is not installed (Debian's python3-matplotlib: cluster/install-deps.sh "
                   "plot); later: {}", command_text({"python3", script, out + "/results.csv", out + "/sweep.png"}));
    else if (!plot.ok())
      spdlog::warn("no plot: {} failed (its error is above)", script);
    else
      spdlog::info("plot: {}/sweep.png", out);
  }
  if (interrupted) return 130;
  return failed == 0 ? 0 : 1;
}

}  // namespace psbed::cluster
