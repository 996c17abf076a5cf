#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "cluster/sweep_parts.hpp"
#include "core/comm.hpp"
#include "core/error.hpp"
#include "core/policy.hpp"
#include "core/units.hpp"
#include "ps/cluster_map.hpp"
#include "ps/link.hpp"
#include "worker/net.hpp"

namespace psbed::cluster::sweep_detail {
namespace fs = std::filesystem;

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

bool has_value(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::string hms(double s) {
  char buf[32];
  const int t = int(s + 0.5);
  std::snprintf(buf, sizeof buf, "%dm%02ds", t / 60, t % 60);
  return buf;
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
std::string joined(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : sep) + i;
  return out;
}
// The `psbed launch` command line of one point: the policy settings its policy uses (launch says
// so of any other).
std::vector<std::string> launch_args(const LaunchOptions& o) {
  std::vector<std::string> a = {"launch",
                                "--servers",
                                std::to_string(o.servers),
                                "--workers",
                                std::to_string(o.workers),
                                "--model",
                                o.model,
                                "--data",
                                o.data,
                                "--mode",
                                o.mode,
                                "--policy",
                                o.policy,
                                "--epochs",
                                std::to_string(o.epochs),
                                "--steps",
                                std::to_string(o.steps),
                                "--batch",
                                std::to_string(o.batch),
                                "--lr",
                                num(o.lr),
                                "--momentum",
                                num(o.momentum),
                                "--weight-decay",
                                num(o.weight_decay),
                                "--lr-schedule",
                                o.lr_schedule,
                                "--seed",
                                std::to_string(o.seed),
                                "--partition-bytes",
                                o.partition_bytes,
                                "--threads",
                                std::to_string(o.threads),
                                "--apply-threads",
                                std::to_string(o.apply_threads),
                                "--device",
                                o.device,
                                "--compute",
                                o.compute,
                                "--out",
                                o.out,
                                "--heartbeat",
                                num(o.heartbeat_s),
                                "--heartbeat-timeout",
                                num(o.heartbeat_timeout_s),
                                "--timeout",
                                num(o.timeout_s)};
  if (!o.data_dir.empty()) a.insert(a.end(), {"--data-dir", o.data_dir});
  if (o.push_pull) a.push_back("--push-pull");
  if (o.connections > 1) a.insert(a.end(), {"--connections", std::to_string(o.connections)});
  if (policy::uses_slice_params(o.policy))
    a.insert(a.end(), {"--slice-params", std::to_string(o.slice_params)});
  if (policy::uses_partition_params(o.policy))
    a.insert(a.end(), {"--partition-params", std::to_string(o.partition_params)});
  if (!o.credit.empty() && policy::uses_credit(o.policy)) a.insert(a.end(), {"--credit", o.credit});
  if (!o.bandwidth.empty()) a.insert(a.end(), {"--bandwidth", o.bandwidth});
  if (!o.latency.empty()) a.insert(a.end(), {"--latency", o.latency});
  if (o.comm != "ps") a.insert(a.end(), {"--comm", o.comm});
  if (o.netns) a.push_back("--netns");
  if (!o.trace) a.push_back("--no-trace");
  // Not sweep flags, but optimize --verify's settings check launches through here too.
  if (o.replicas != 1) a.insert(a.end(), {"--replicas", std::to_string(o.replicas)});
  for (const auto& s : o.stragglers) a.insert(a.end(), {"--straggler", s});
  if (o.straggler_ms > 0) a.insert(a.end(), {"--straggler-ms", num(o.straggler_ms)});
  if (o.start_stagger_ms > 0) a.insert(a.end(), {"--start-stagger-ms", num(o.start_stagger_ms)});
  return a;
}

void check_grid(SweepOptions& opt) {
  LaunchOptions& base = opt.base;
  if (base.out.empty())
    throw Error("--out is required: the folder that receives every run and results.csv");
  if (opt.policies.size() == 1 && opt.policies[0] == "all") opt.policies = policy::policy_names();
  // Every value is checked before the first run, so a typo does not surface an hour in.
  for (const auto& p : opt.policies) {
    policy::PolicyOptions po;
    po.name = p;
    policy::check_policy_options(po);
  }
  for (const auto& m : opt.modes)
    if (const std::string why = comm_problem(parse_comm(base.comm), ps::Consistency::parse(m));
        !why.empty())
      throw Error(why);
  // A GPU sweep on a machine without one fails here once, not at every point.
  worker::require_device(base.device);
  for (auto& b : opt.bandwidths) b = point_bandwidth(b);
  std::vector<double>
      rates;  // bits/s, read once: 100mbit and 100Mbit, 1gbit and 1000mbit are one link
  for (const auto& b : opt.bandwidths)
    rates.push_back(ps::parse_link(b, base.latency).bandwidth_bps);
  for (int w : opt.workers)
    if (w < 1) throw Error("--workers: every count must be at least 1, got " + std::to_string(w));
  for (int s : opt.servers)
    if (s < 1) throw Error("--servers: every count must be at least 1, got " + std::to_string(s));
  if (opt.workers.empty() || opt.servers.empty() || opt.policies.empty() || opt.modes.empty() ||
      opt.bandwidths.empty())
    throw Error(
        "the grid is empty: give at least one value to --workers, --servers, --policy, --mode, "
        "--bandwidth");
  // A value given twice would run its points twice into one folder (the second taking the first
  // for a failed run) and double their rows: --repeat is how a point runs again.
  const std::string again = " (to run a point again, use --repeat)";
  require_distinct("--workers", opt.workers, again);
  require_distinct("--servers", opt.servers, again);
  require_distinct("--policy", opt.policies, again);
  require_distinct("--mode", opt.modes, again);
  std::sort(rates.begin(), rates.end());
  if (std::adjacent_find(rates.begin(), rates.end()) != rates.end())
    throw Error(
        "--bandwidth gives one rate twice (0 and unshaped are one; to run a point again, use "
        "--repeat)");
}

std::vector<Point> make_grid(const SweepOptions& opt) {
  const LaunchOptions& base = opt.base;
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
            pt.name = slug(m) + "-" + p + "-" + (b.empty() ? "unshaped" : b) + "-" +
                      std::to_string(s) + "s" + std::to_string(w) + "w";
            std::error_code ec;  // an --out that cannot be read is named below
            if (!fs::exists(base.out + "/" + pt.name, ec))
              for (const auto& [folder, q] : earlier)
                if (q.policy == p && q.servers == s && q.workers == w &&
                    q.name.rfind(slug(m) + "-", 0) == 0 && same_rate(q.bandwidth, b)) {
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
  return grid;
}

}  // namespace psbed::cluster::sweep_detail
