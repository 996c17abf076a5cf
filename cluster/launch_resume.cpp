// `psbed launch --resume RUN`: the run's own command line, kept in RUN/launch.json, started again
// from the newest step every shard checkpointed. What the stopped attempt left (its summary,
// logs and traces) moves to RUN/attempt-N/, so the new attempt's files are the run's.
// Also the word launch gives the coordinator when a node it started ends (--replicas 2).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <deque>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cluster/cli_config.hpp"
#include "cluster/commands.hpp"
#include "cluster/launch.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/partition.hpp"
#include "core/units.hpp"
#include "ps/checkpoint.hpp"
#include "ps/cluster_map.hpp"
#include "ps/control.hpp"

namespace psbed::cluster {
namespace fs = std::filesystem;

namespace {

std::string launch_file(const std::string& run) { return run + "/launch.json"; }

// The map a shard of this run checks its checkpoint against, as the coordinator would make it.
ps::ClusterMap expected_map(const LaunchOptions& opt) {
  ps::ClusterMap map;
  map.spec = load_model(opt.model);
  std::ifstream in(map.spec.source);
  map.exp.model_toml.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  map.exp.model_name = map.spec.name;
  map.servers.resize(std::size_t(opt.servers));
  map.plan = make_partition(map.spec, std::int64_t(parse_bytes(opt.partition_bytes)), opt.servers);
  return map;
}

}  // namespace

void save_launch_args(const std::string& run, const std::vector<std::string>& args) {
  write_text_file(launch_file(run), nlohmann::json{{"args", args}}.dump(2) + "\n");
}

std::int64_t prepare_resume(const LaunchOptions& opt) {
  const std::string run = opt.resume;
  const std::string dir = run + "/checkpoints";
  // A run that ended well has nothing left to train: resuming it would train its tail again.
  if (std::ifstream done(run + "/summary.json"); done) {
    const nlohmann::json j = nlohmann::json::parse(done, nullptr, false);
    if (j.is_object() && j.value("ok", false))
      throw Error("--resume " + run + ": the run finished (its summary.json says ok): nothing to " +
                  "resume; give another --out to train again");
  }
  const std::int64_t step = ps::latest_checkpoint_step(dir, opt.servers);
  if (step < 0)
    throw Error("--resume " + run + ": " + dir + " holds no checkpoint of all " +
                std::to_string(opt.servers) + " shards: nothing to resume from");
  const ps::ClusterMap map = expected_map(opt);
  for (int s = 0; s < opt.servers; ++s) {
    const std::string path = ps::checkpoint_path(dir, s, std::uint64_t(step));
    ps::check_checkpoint(ps::read_checkpoint(path), map, s, path);
  }
  int n = 1;
  while (fs::exists(run + "/attempt-" + std::to_string(n))) ++n;
  const std::string aside = run + "/attempt-" + std::to_string(n);
  std::error_code ec;
  for (const char* f : {"summary.json", "logs", "traces"}) {
    if (!fs::exists(run + "/" + f, ec)) continue;
    fs::create_directories(aside, ec);
    fs::rename(run + "/" + f, aside + "/" + f, ec);
    if (ec)
      throw Error("--resume " + run + ": cannot move its earlier " + f + " to " + aside + ": " +
                  ec.message());
  }
  // A shard's checkpoint past the chosen step (the others never wrote theirs) goes too: left here,
  // a later resume could pair it with a file of the new attempt.
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string f = e.path().filename().string();
    const auto at = f.find(".step-");
    if (at == std::string::npos || f.size() < 5 || f.substr(f.size() - 5) != ".ckpt") continue;
    const std::string num = f.substr(at + 6, f.size() - 5 - at - 6);
    if (num.empty() || num.size() > 18 ||
        num.find_first_not_of("0123456789") != std::string::npos || std::stoll(num) <= step)
      continue;
    fs::create_directories(aside + "/checkpoints", ec);
    fs::rename(e.path(), aside + "/checkpoints/" + f, ec);
    if (ec)
      throw Error("--resume " + run + ": cannot move " + e.path().string() + " to " + aside + ": " +
                  ec.message());
  }
  spdlog::info("resuming {} from step {} (the stopped attempt's files are in {})", run, step,
               aside);
  return step;
}

int run_resume(const std::string& run, const std::vector<std::string>& given,
               const std::string& log_level) {
  for (std::size_t i = 0; i < given.size(); ++i) {
    const std::string& a = given[i];
    if (a == "--resume" || a == "--log-level") {
      ++i;
      continue;
    }
    if (a.rfind("--resume=", 0) == 0 || a.rfind("--log-level=", 0) == 0) continue;
    throw UsageError("--resume takes the run's settings from " + launch_file(run) + ": give " + a +
                     " to a new run instead (only --log-level goes with it)");
  }
  std::ifstream in(launch_file(run));
  if (!in)
    throw Error("--resume " + run + ": no " + launch_file(run) +
                " (a run started with --checkpoint-every has one)");
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object() || !j.contains("args") || !j["args"].is_array())
    throw Error("--resume " + run + ": " + launch_file(run) +
                " is damaged: expected {\"args\": [...]}");
  std::vector<std::string> args;
  for (const auto& a : j["args"]) {
    if (!a.is_string()) throw Error("--resume " + run + ": " + launch_file(run) + " is damaged");
    args.push_back(a.get<std::string>());
  }
  CLI::App root;
  LaunchOptions opt;
  std::string level = log_level;
  enable_subcommand_configs(root);
  add_launch(root, opt, level);
  std::vector<std::string> argv = {"launch"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::reverse(argv.begin(), argv.end());  // CLI11 takes a reversed vector
  try {
    root.parse(argv);
  } catch (const CLI::ParseError& e) {
    throw Error("--resume " + run + ": " + launch_file(run) + " no longer parses: " + e.what());
  }
  opt.args = args;
  opt.resume = run;
  opt.out = run;
  return run_launch(opt);
}

std::string tail_of(const std::string& path, int lines) {
  std::ifstream in(path);
  std::deque<std::string> last;
  for (std::string l; std::getline(in, l);) {
    last.push_back(l);
    if (int(last.size()) > lines) last.pop_front();
  }
  std::string out;
  for (const auto& l : last) out += "    " + l + "\n";
  return out;
}

bool log_mentions(const std::string& path, const std::string& text) {
  std::ifstream in(path);
  for (std::string l; std::getline(in, l);)
    if (l.find(text) != std::string::npos) return true;
  return false;
}

}  // namespace psbed::cluster

namespace psbed::cluster {

bool tell_node_gone(const std::string& coordinator, const std::string& keys,
                    const std::string& token, const std::string& name, const std::string& why) {
  if (coordinator.empty()) return false;
  nlohmann::json req = {{"command", "node_gone"}, {"name", name}, {"reason", why}};
  if (!token.empty()) req["token"] = token;
  try {
    const nlohmann::json reply =
        ps::control_request(coordinator, req, 3.0, ps::node_keys(keys, "", "ctl"));
    if (reply.value("ok", false)) return true;
    spdlog::warn("the coordinator did not take the word that {} ended: {}", name,
                 reply.value("error", std::string("refused")));
  } catch (const std::exception& e) {
    spdlog::warn("cannot tell the coordinator that {} ended: {}", name, e.what());
  }
  return false;
}

}  // namespace psbed::cluster

namespace psbed::cluster {

std::string summary_failure(const std::string& path, const std::string& otherwise) {
  std::ifstream in(path);
  if (!in) return otherwise;
  try {
    const nlohmann::json s = nlohmann::json::parse(in);
    const auto it = s.find("failure");
    if (it != s.end() && it->is_string() && !it->get<std::string>().empty())
      return it->get<std::string>();
  } catch (const std::exception&) {
  }
  return otherwise;
}

}  // namespace psbed::cluster
