#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>

#include "cluster/sweep_parts.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/model_spec.hpp"
#include "core/policy.hpp"
#include "core/units.hpp"

namespace psbed::cluster::sweep_detail {
namespace fs = std::filesystem;

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
  for (const char* own :
       {"--servers", "--workers", "--mode", "--policy", "--bandwidth", "--out", "--timeout"})
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
    if (flag == "--model")
      value = load_model(value).name;
    else if (flag == "--partition-bytes")
      value = std::to_string(parse_bytes(value));
    else if (flag == "--latency")
      value = num(parse_duration_s(value)) + "s";
    else if (flag == "--data-dir")
      value = canonical(value);
    else if (flag == "--compute" && value.rfind("replay:", 0) == 0)
      value = "replay:" + canonical(value.substr(7));
  }
  return m;
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
      if (k.size() < 9 &&
          std::all_of(k.begin(), k.end(), [](char c) { return c >= '0' && c <= '9'; }))
        last = std::max(last, std::stoi(k));
    }
  }
  return last == 0 ? folder + ".failed" : folder + ".failed-" + std::to_string(last + 1);
}
// What a finished run's summary says it ran with, where that differs from the sweep's settings
// `o` (model, batch, steps, compute, learning rate): "20 steps, not 40", or "" if nothing does.
std::string settings_differ(const json& s, const LaunchOptions& o) {
  std::string d;
  auto add = [&](const std::string& what) { d += (d.empty() ? "" : ", ") + what; };
  const std::string model = load_model(o.model).name;  // what summary.json says: the spec's name
  if (s.value("model", model) != model)
    add("model " + s.value("model", std::string()) + ", not " + model);
  if (s.value("batch", o.batch) != o.batch)
    add("batch " + std::to_string(s.value("batch", 0)) + ", not " + std::to_string(o.batch));
  if (o.steps > 0 && s.value("steps", o.steps) != o.steps)
    add(std::to_string(s.value("steps", std::int64_t(0))) + " steps, not " +
        std::to_string(o.steps));
  if (s.value("compute", o.compute) != o.compute)
    add("compute " + s.value("compute", std::string()) + ", not " + o.compute);
  const double lr = s.value("lr", double(o.lr));
  // Sweeps pass the rate on with six digits (num): equal within that.
  if (std::abs(lr - double(o.lr)) > 1e-5 * std::abs(double(o.lr)) + 1e-12)
    add("lr " + num(lr) + ", not " + num(o.lr));
  return d;
}

// What a kept run of `policy` was given of the settings that policy uses, where this sweep would
// give it otherwise (values as they act: a default credit and the same number of bytes are
// one): "--credit 1.00 MiB (now 4.00 MiB)" each, or none. `was` is the run's summary's
// policy_options; a run without them (an older launch) is not compared.
std::vector<std::string> policy_changes(const std::string& policy, const json& was,
                                        const LaunchOptions& o) {
  std::vector<std::string> d;
  if (!was.is_object()) return d;
  auto number = [&](const char* key) -> std::optional<std::int64_t> {
    if (!was.contains(key) || !was[key].is_number_integer()) return std::nullopt;
    return was[key].get<std::int64_t>();
  };
  auto compare = [&](const char* flag, const char* key, std::int64_t now) {
    const auto before = number(key);
    if (before && *before != now)
      d.push_back(std::string(flag) + " " + std::to_string(*before) + " (now " +
                  std::to_string(now) + ")");
  };
  if (policy::uses_slice_params(policy)) compare("--slice-params", "slice_params", o.slice_params);
  if (policy::uses_partition_params(policy))
    compare("--partition-params", "partition_params", o.partition_params);
  if (policy::uses_credit(policy) && number("credit_bytes")) {
    LaunchOptions with_policy = o;
    with_policy.policy = policy;
    const policy::PolicyOptions now = policy_options(with_policy);
    policy::PolicyOptions before = now;
    before.credit_bytes = *number("credit_bytes");
    const std::int64_t b = policy::credit_in_effect(before), n = policy::credit_in_effect(now);
    auto said = [&](std::int64_t bytes, bool by_default) {
      return format_bytes(double(bytes)) + (by_default ? ", " + policy + "'s default" : "");
    };
    if (b != n)
      d.push_back("--credit " + said(b, before.credit_bytes < 0) + " (now " +
                  said(n, now.credit_bytes < 0) + ")");
  }
  return d;
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
    p.bandwidth = same_rate(m[3], "") || m[3] == "unshaped"
                      ? ""
                      : m[3].str();  // 0 from before it was unshaped
    p.servers = std::stoi(m[4]), p.workers = std::stoi(m[5]);
    p.repeat = m[6].matched ? std::stoi(m[6]) : 1;
    p.name = p.repeat == 1 ? name : name.substr(0, name.size() - m[6].length() - 2);
    found.emplace(name, p);
  }
  return found;
}
void check_kept_runs(const SweepOptions& opt) {
  const LaunchOptions& base = opt.base;
  const std::string& out = base.out;
  // --resume keeps a finished point only if it ran with this sweep's settings; one that did not
  // is refused here, before anything runs (its results would be labelled with settings it did
  // not have).
  // Every finished run in the folder counts, the grid's and those outside it that stay in the
  // results after its rows.
  std::map<std::string, Point> kept;
  if (opt.resume) kept = finished_points(out);
  for (const auto& [name, p] : kept) {
    const std::string differs =
        settings_differ(read_summary(out + "/" + name + "/summary.json"), base);
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
      auto said = [](bool has, const std::string& v) {
        return !has ? std::string("not given") : v.empty() ? std::string("on") : v;
      };
      std::map<std::string, std::pair<std::string, std::string>> change;  // flag -> (was, now)
      for (const auto& [flag, value] : settings) {
        const bool had = before.contains(flag) && before[flag].is_string();
        const std::string was = had ? before[flag].get<std::string>() : "";
        if (!had || was != value) change[flag] = {said(had, was), said(true, value)};
      }
      for (const auto& [flag, was] : before.items()) {
        // An older sweep recorded the policy settings as shared: they are compared below, per run.
        const bool policy_flag =
            std::any_of(std::begin(kPolicyFlags), std::end(kPolicyFlags),
                        [&, &flag = flag](const char* f) { return flag == f; });
        if (!settings.count(flag) && was.is_string() && !policy_flag)
          change[flag] = {said(true, was.get<std::string>()), "not given"};
      }
      std::string differs;
      for (const auto& [flag, wn] : change)
        differs +=
            (differs.empty() ? "" : ", ") + flag + " " + wn.first + " (now " + wn.second + ")";
      if (!differs.empty())
        throw Error("--resume: the sweep in " + out + " ran with " + differs +
                    ": give its earlier settings, or another --out");
    }
    // The policy settings, for the runs kept whose policy this sweep runs and uses them (a kept
    // run of a policy it does not run is given nothing by it): each as its summary says it was.
    std::map<std::string, std::vector<std::string>>
        runs_by_change;  // "--credit 1 MiB (now 4 MiB)" -> runs
    for (const auto& [name, p] : finished_points(out)) {
      if (!has_value(opt.policies, p.policy)) continue;
      const json s = read_summary(out + "/" + name + "/summary.json");
      for (const auto& c : policy_changes(p.policy, s.value("policy_options", json()), base))
        runs_by_change[c].push_back(name);
    }
    std::string differs;
    for (const auto& [change, runs] : runs_by_change)
      differs +=
          (differs.empty() ? "" : "; ") + change + " in " + runs.front() +
          (runs.size() > 1 ? " and " + std::to_string(runs.size() - 1) + " other run(s)" : "");
    if (!differs.empty())
      throw Error("--resume: the sweep in " + out + " ran with " + differs +
                  ": give its earlier settings, or another --out");
  }
  if (record) std::ofstream(settings_path) << json(settings).dump(1) << "\n";
}

void carry_kept_runs(const SweepOptions& opt, json& rows, std::ostream& csv) {
  const LaunchOptions& base = opt.base;
  const std::string& out = base.out;
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
    spdlog::info("kept {} finished run(s) this call did not visit in the results ({})",
                 carried.size(), names);
  }
}

}  // namespace psbed::cluster::sweep_detail
