#include "cluster/ctl.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>

#include "cluster/cli_config.hpp"
#include "core/error.hpp"
#include "ps/control.hpp"

namespace psbed::cluster {

using json = nlohmann::json;

void add_ctl(CLI::App& root, CtlOptions& o, std::string& log_level) {
  auto* app = root.add_subcommand(
      "ctl", "Control a running cluster: switch the transmission policy or --comm, show status");
  app->footer(
      "Examples:\n"
      "  psbed ctl --run runs/demo/cluster policy p3 --credit 2MiB\n"
      "  psbed ctl --coordinator tcp://10.0.0.1:7000 status --output json\n"
      "  psbed ctl --run runs/demo/cluster comm hybrid\n"
      "Workers switch at their next step boundary; ctl prints the step from which every worker "
      "runs\n"
      "the new policy. The switch is marked in each worker's trace (control lane) and listed in\n"
      "summary.json under policy_switches. `comm` switches every worker at one step that they\n"
      "agree on (bsp only): listed under comm_switches, marked comm:MODE in the traces.");
  add_config_option(app);
  app->add_option("--log-level", log_level, "trace, debug, info, warn or error")
      ->capture_default_str();
  auto* where = app->add_option("--coordinator", o.coordinator,
                                "the coordinator's endpoint, e.g. tcp://127.0.0.1:7000");
  app->add_option("--run", o.run,
                  "or: a `psbed launch` run folder still running (reads logs/coordinator.endpoint)")
      ->excludes(where);
  app->add_option("--token", o.token,
                  "the coordinator's --http-token, required when it has one (default "
                  "$PSBED_HTTP_TOKEN)");
  as_duration(app->add_option("--timeout", o.timeout_s, "seconds to wait for the answer"), "s")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 1e6));
  app->add_option_function<std::string>(
         "--output", [&o](const std::string& v) { o.json = v == "json"; },
         "how to print the coordinator's answer: text or json (default text)")
      ->type_name("FORMAT")
      ->check(one_of({"text", "json"}));
  // --json names a file everywhere else; as a flag here it stays out of --help, for old scripts.
  app->add_flag("--json", o.json, "print the answer as JSON (now --output json)")->group("");
  app->add_option("--keys", o.keys,
                  "CURVE key folder (psbed keys) of a cluster started with --keys; uses "
                  "coordinator.pub and ctl.key (default with --run: RUN/keys when there)");
  app->add_option("--key", o.key_file, "this client's secret key (default <keys>/ctl.key)");
  app->require_subcommand(1);
  auto* pol = app->add_subcommand("policy", "Switch every worker to this transmission policy");
  pol->fallthrough();  // --timeout, --json after the subcommand still reach ctl
  pol->add_option("name", o.policy, "bulk, wfbp, tf-random, p3, bytescheduler or prophet")
      ->required();
  pol->add_option("--slice-params", o.slice_params, "p3, prophet: parameters per slice")
      ->check(positive("a parameter count"));
  pol->add_option("--partition-params", o.partition_params,
                  "bytescheduler: parameters per partition")
      ->check(positive("a parameter count"));
  pol->add_option(
         "--credit", o.credit,
         "p3/bytescheduler: bytes in flight; prophet: largest block (e.g. 2MiB, or 'default')")
      ->transform(credit_value());
  auto* comm = app->add_subcommand(
      "comm", "Switch how the fc layers travel (--comm), at a step every worker takes together");
  comm->fallthrough();
  comm->add_option("mode", o.comm, "ps, sfb or hybrid (bsp runs only)")->required();
  app->add_subcommand("status", "Print the current policy, the mode and each worker's progress")
      ->fallthrough();
}

namespace {

std::string endpoint_of(const CtlOptions& o) {
  if (!o.coordinator.empty()) return o.coordinator;
  if (o.run.empty())
    throw UsageError("say which cluster: --coordinator ENDPOINT or --run RUN_FOLDER");
  const std::string path = o.run + "/logs/coordinator.endpoint";
  // A finished run has no coordinator to ask (it would wait out --timeout, or its namespace is
  // gone): say so at once.
  if (std::ifstream done(o.run + "/summary.json"); done)
    throw Error("the run in " + o.run +
                " has finished (its summary.json is written): there is no coordinator to ask");
  // A --netns run: its coordinator listens inside its own namespace; join it to reach it.
  if (std::ifstream ns(o.run + "/logs/coordinator.netns"); ns) {
    std::string name;
    if (ns >> name) {
      const int fd = ::open(("/var/run/netns/" + name).c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0)
        throw Error("cannot enter the run's network namespace " + name + ": " +
                    std::strerror(errno) +
                    (errno == EPERM    ? " (needs root)"
                     : errno == ENOENT ? " (the run is not running)"
                                       : ""));
      ::close(fd);
    }
  }
  std::ifstream in(path);
  std::string ep;
  if (!(in >> ep))
    throw Error("no coordinator endpoint in '" + path + "' (is " + o.run +
                " a running `psbed launch` folder?)");
  return ep;
}

}  // namespace

int run_ctl(CLI::App& root, const CtlOptions& o) {
  CLI::App* app = root.get_subcommand("ctl");
  const std::string ep = endpoint_of(o);
  json req;
  if (app->got_subcommand("policy")) {
    req = {{"command", "policy"}, {"policy", o.policy}};
    // Sent whenever given, so that the coordinator refuses a bad value rather than ctl
    // dropping it.
    const CLI::App* pol = app->get_subcommand("policy");
    if (pol->count("--slice-params") > 0) req["slice_params"] = o.slice_params;
    if (pol->count("--partition-params") > 0) req["partition_params"] = o.partition_params;
    if (pol->count("--credit") > 0)
      req["credit"] = o.credit.empty() ? std::string("default") : o.credit;
  } else if (app->got_subcommand("comm")) {
    req = {{"command", "comm"}, {"mode", o.comm}};
  } else {
    req = {{"command", "status"}};
  }
  if (!o.token.empty())
    req["token"] = o.token;
  else if (const char* t = std::getenv("PSBED_HTTP_TOKEN"); t && *t)
    req["token"] = t;
  // A `launch --secure` run keeps its keys beside its logs.
  std::string keys = o.keys;
  if (keys.empty() && !o.run.empty() && std::ifstream(o.run + "/keys/ctl.key"))
    keys = o.run + "/keys";
  const json reply =
      ps::control_request(ep, req, o.timeout_s, ps::node_keys(keys, o.key_file, "ctl"));
  if (o.json) {
    json shown = reply;
    shown.erase("event");  // the transport's tag, not part of the answer
    std::printf("%s\n", shown.dump(2).c_str());
  }
  if (!reply.value("ok", false)) {
    if (!o.json) {
      // The request's fields by the flags that set them.
      std::string why = reply.value("error", std::string("refused"));
      for (const auto& [field, flag] :
           {std::pair<std::string, std::string>{"field 'slice_params'", "--slice-params"},
            {"field 'partition_params'", "--partition-params"},
            {"field 'credit'", "--credit"}})
        for (std::size_t at; (at = why.find(field)) != std::string::npos;)
          why.replace(at, field.size(), flag);
      std::fprintf(stderr, "psbed ctl: %s\n", why.c_str());
    }
    return 1;
  }
  if (o.json) return 0;
  if (app->got_subcommand("comm")) {
    std::printf("comm %s from step %lld (was %s): %s\n", reply.value("mode", o.comm).c_str(),
                (long long)reply.value("step", std::int64_t(-1)),
                reply.value("was", std::string("?")).c_str(),
                reply.value("describe", std::string("?")).c_str());
  } else if (app->got_subcommand("policy")) {
    std::printf("policy %s took effect at step %lld", reply.value("describe", o.policy).c_str(),
                (long long)reply.value("step", std::int64_t(-1)));
    std::string per;
    for (const auto& [name, step] : reply["workers"].items())
      per += (per.empty() ? "" : ", ") + name + " " + step.dump();
    std::printf(" (%s)\n", per.c_str());
  } else {
    std::printf("policy %s, mode %s, %lld steps per worker%s\n",
                reply.value("describe", std::string("?")).c_str(),
                reply.value("mode", std::string("?")).c_str(),
                (long long)reply.value("steps", std::int64_t(0)),
                reply.value("started", false) ? "" : " (not started: waiting for nodes)");
    for (const auto& w : reply["workers"]) {
      // A diverged worker's NaN loss comes as null (JSON has no NaN).
      std::string loss = "-";
      if (w.contains("loss") && w["loss"].is_number())
        loss = fmt::format("{:.4f}", w["loss"].get<double>());
      if (w.contains("loss") && w["loss"].is_null()) loss = "nan";
      std::printf(
          "  %-12s %s step %-6s %8.1f images/s  loss %s  policy %s\n",
          w.value("name", std::string("?")).c_str(), w.value("alive", false) ? "alive" : "dead ",
          w.contains("step") ? w["step"].dump().c_str() : "-", w.value("images_per_sec", 0.0),
          loss.c_str(), w.value("policy", std::string("-")).c_str());
    }
    for (const auto& s : reply["policy_switches"])
      std::printf("  switched to %s at step %s\n", s.value("describe", std::string("?")).c_str(),
                  s["step"].dump().c_str());
    if (reply.contains("comm_switches"))
      for (const auto& s : reply["comm_switches"])
        std::printf("  switched to --comm %s at step %s\n",
                    s.value("mode", std::string("?")).c_str(), s["step"].dump().c_str());
  }
  return 0;
}

}  // namespace psbed::cluster
