#include "cluster/launch.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "cluster/netns.hpp"
#include "core/comm.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/model_spec.hpp"
#include "core/optimizer.hpp"
#include "core/partition.hpp"
#include "core/policy.hpp"
#include "core/profile.hpp"
#include "core/straggler.hpp"
#include "core/trace.hpp"
#include "core/units.hpp"
#include "ps/checkpoint.hpp"
#include "ps/cluster_map.hpp"
#include "ps/coordinator.hpp"
#include "ps/curve.hpp"
#include "ps/http_server.hpp"
#include "ps/link.hpp"
#include "ps/stop_signals.hpp"
#include "worker/net.hpp"
#include "workloads/dataset.hpp"

namespace psbed::cluster {
namespace fs = std::filesystem;
namespace {

struct Child {
  std::string name, role, log;
  pid_t pid = -1;
  bool running = true;
  int status = 0;
  double cpu_s = -1;  // user + system CPU seconds, once reaped
};

// waitpid that also returns the child's CPU time (user + system seconds).
pid_t reap_child(pid_t which, int* status, int options, double* cpu_s) {
  rusage ru{};
  const pid_t pid = ::wait4(which, status, options, &ru);
  if (pid > 0)
    *cpu_s = double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
             double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  return pid;
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return std::string("killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  return "stopped";
}

// A number as a flag value, every digit kept (std::to_string keeps six decimals: 4e-7 -> 0).
std::string exact(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

class Launcher {
 public:
  explicit Launcher(const LaunchOptions& opt) : opt_(opt) {}

  int run() {
    if (opt_.servers < 1 || opt_.workers < 1)
      throw Error("--servers and --workers must be at least 1, got " +
                  std::to_string(opt_.servers) + " and " + std::to_string(opt_.workers));
    // Refuse bad settings here, in one line, rather than through a child's log.
    check_launch_options(opt_);
    if (const std::string why =
            comm_problem(parse_comm(opt_.comm), ps::Consistency::parse(opt_.mode));
        !why.empty())
      throw Error(why);
    if (opt_.secure && opt_.comm != "ps")
      throw Error("--secure with --comm " + opt_.comm +
                  ": the workers' factor links have no CURVE yet; use --comm ps");
    worker::require_device(opt_.device);  // a GPU run without a device: status 2, not a timeout
    scheduled_lr(opt_.lr_schedule, opt_.lr, 0, 1);
    link_ = ps::parse_link(opt_.bandwidth, opt_.latency);
    stragglers_ = parse_stragglers(opt_.stragglers, opt_.workers);
    policy::check_policy_options(policy_options(opt_));
    warn_unused_policy_settings();
    if (!opt_.http.empty() && !ps::parse_http_address(opt_.http).loopback() &&
        opt_.http_token.empty() && !std::getenv("PSBED_HTTP_TOKEN"))
      throw Error("--http " + opt_.http +
                  " is reachable beyond this host: give --http-token (or bind 127.0.0.1)");
    // Checked before the run rather than by the worker after it (a run trained for nothing).
    ensure_writable_file(opt_.save_params, "--save-params");
    out_ = opt_.out.empty() ? default_out() : opt_.out;
    for_flag("--checkpoint-every",
             [&] { return ps::parse_checkpoint_every(opt_.checkpoint_every); });
    if (!opt_.resume.empty()) resume_step_ = prepare_resume(opt_);  // moves the last attempt aside
    if (fs::exists(out_ + "/summary.json"))
      throw Error("--out " + out_ +
                  " holds a run already (summary.json): give another --out, or remove it");
    // A run that left no summary (every process killed) left its traces and logs: this run's
    // would lie beside them and be read as one run (profile counts the workers by their traces).
    for (const char* sub : {"/traces", "/logs"}) {
      std::error_code ec;
      if (fs::is_directory(out_ + sub, ec) && !fs::is_empty(out_ + sub, ec))
        throw Error("--out " + out_ + " holds an earlier run's " + (sub + 1) +
                    " (it left no summary.json): give another --out, or remove them");
    }
    ensure_writable_dir(out_ + "/logs", "--out");
    if (!opt_.checkpoint_every.empty()) save_launch_args(out_, opt_.args);
    if (opt_.trace) ensure_writable_dir(out_ + "/traces", "--out");
    if (opt_.secure || !opt_.keys.empty()) make_keys();
    // A closed terminal or ssh session ends the run as Ctrl-C does, unless SIGHUP is ignored
    // (nohup, or a sweep under nohup). SIGCHLD wakes the supervision when a node ends.
    stops_.emplace(true, std::initializer_list<int>{SIGCHLD});
    // Output into a closed pipe (`psbed launch ... | head`) is lost, not the run: writes fail
    // instead of killing the launcher, and the nodes (which inherit this) go on.
    ::signal(SIGPIPE, SIG_IGN);

    spdlog::info("launching {} server(s) + {} worker(s) of {} ({}) into {}", opt_.servers,
                 opt_.workers, opt_.model, opt_.mode, out_);
    if (opt_.netns) make_namespaces(link_);
    // The coordinator binds a free port itself and writes it down (no window in which another
    // process could take a port chosen here).
    const std::string endpoint_file = out_ + "/logs/coordinator.endpoint";
    std::remove(endpoint_file.c_str());
    spawn("coordinator", "coordinator",
          coordinator_args("tcp://" + host_of("coordinator") + ":*", endpoint_file), false);
    std::string why;
    const std::string coord = coord_ = wait_for_endpoint(endpoint_file, why);
    if (coord.empty()) {
      stop_all(3);
      // Its stderr is this terminal (the live progress), so an error line it wrote is above.
      failure_ = why.rfind("coordinator exited", 0) == 0
                     ? "the " + why + " before it listened (its error is above)"
                 : why.rfind("coordinator ", 0) == 0 ? "the " + why + " before it listened"
                                                     : why;
      const int rc = finish(1);
      stops_.reset();
      return rc;
    }
    if (!opt_.http.empty()) {
      // Written before the coordinator's endpoint file, so it is there by now.
      std::string url;
      if (std::ifstream in(out_ + "/logs/coordinator.http"); in) std::getline(in, url);
      if (!url.empty())
        spdlog::info("dashboard: {}{}", url,
                     opt_.http_token.empty() ? "" : "?token=<your --http-token>");
      // The coordinator listens inside its own namespace, which this host's browser cannot enter.
      if (netns_ && !url.empty())
        spdlog::warn(
            "with --netns the dashboard is inside the namespace {}: reach it with `ip netns exec "
            "{} curl {}api/status`",
            netns_->namespaces().front(), netns_->namespaces().front(), url);
    }
    for (int i = 0; i < opt_.servers; ++i)
      spawn("server-" + std::to_string(i), "server", server_args(coord, i), true);
    for (int i = 0; i < opt_.workers; ++i)
      spawn("worker-" + std::to_string(i), "worker", worker_args(coord, i), true);

    const int rc = finish(supervise());  // signals still blocked: the summary is always written
    stops_.reset();
    return rc;
  }

 private:
  std::string default_out() const {
    char buf[32];
    std::time_t t = std::time(nullptr);
    std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", std::localtime(&t));
    return "runs/" + opt_.model + "-" + opt_.mode + "-" + std::to_string(opt_.workers) + "w" +
           std::to_string(opt_.servers) + "s-" + buf;
  }

  // --secure: every node gets its own key pair (fresh ones in OUT/keys, where `psbed ctl --run`
  // finds ctl's), each checked now rather than by a node that fails to start.
  void make_keys() {
    std::vector<std::string> names = {"coordinator"};
    for (int i = 0; i < opt_.servers; ++i) names.push_back("server-" + std::to_string(i));
    for (int i = 0; i < opt_.workers; ++i) names.push_back("worker-" + std::to_string(i));
    keys_ = opt_.keys;
    if (keys_.empty()) {
      keys_ = out_ + "/keys";
      names.push_back("ctl");
      ps::write_key_set(keys_, names);
    }
    for (const auto& n : names) (void)ps::node_keys(keys_, "", n);
    spdlog::info("CURVE on every link: keys in {}", keys_);
  }

  // With --netns every node has its own namespace and address; tc shapes the links, so the
  // nodes' in-process shaping stays off (latency stays in user space: this kernel has no netem).
  void make_namespaces(const ps::LinkOptions& link) {
    netns_ = std::make_unique<NetnsTestbed>(std::uint64_t(link.bandwidth_bps));
    std::vector<std::string> nodes = {"coordinator"};
    for (int i = 0; i < opt_.servers; ++i) nodes.push_back("server-" + std::to_string(i));
    for (int i = 0; i < opt_.workers; ++i) nodes.push_back("worker-" + std::to_string(i));
    for (const auto& n : nodes) addresses_[n] = netns_->add_node(n);
    for (const auto& s : stragglers_)  // a slow worker's veth at its own rate
      if (s.bandwidth_bytes_per_sec > 0)
        netns_->shape("worker-" + std::to_string(s.worker),
                      std::uint64_t(s.bandwidth_bytes_per_sec * 8));
    std::ofstream(out_ + "/logs/coordinator.netns") << netns_->namespaces().front() << "\n";
    spdlog::info("{} network namespaces on a bridge, links {}", nodes.size(),
                 link.bandwidth_bps > 0 ? "shaped by tc tbf to " + opt_.bandwidth + " per direction"
                                        : "unshaped");
  }

  std::string host_of(const std::string& node) const {
    auto it = addresses_.find(node);
    return it == addresses_.end() ? "127.0.0.1" : it->second;
  }

  std::vector<std::string> common(const std::string& coord, const std::string& name) const {
    std::vector<std::string> a = {"--coordinator",        coord, "--name", name, "--heartbeat",
                                  exact(opt_.heartbeat_s)};
    if (!opt_.bandwidth.empty() && !opt_.netns) a.insert(a.end(), {"--bandwidth", opt_.bandwidth});
    if (!opt_.latency.empty()) a.insert(a.end(), {"--latency", opt_.latency});
    if (opt_.trace) a.insert(a.end(), {"--trace-dir", out_ + "/traces"});
    if (!keys_.empty()) a.insert(a.end(), {"--keys", keys_});
    return a;
  }

  // Polls for the file the coordinator writes once it listens (bounded: 20 s, or its death).
  // The endpoint the coordinator wrote to `path`, or "" with the reason in `failure` (its exit
  // status, when it stopped first: its error line is on this terminal, its stderr being the
  // live progress).
  std::string wait_for_endpoint(const std::string& path, std::string& failure) {
    for (int i = 0; i < 1000; ++i) {
      if (std::ifstream in(path); in) {
        std::string e;
        if (std::getline(in, e) && !e.empty()) return e;
      }
      if (!reap(failure) || coordinator_done_) {
        if (failure.empty()) failure = "the coordinator stopped before it listened";
        return "";
      }
      ::usleep(20000);
    }
    failure = "the coordinator did not start listening within 20 s";
    return "";
  }

  std::vector<std::string> coordinator_args(const std::string& coord,
                                            const std::string& endpoint_file) const {
    std::vector<std::string> a = {"coordinator",
                                  "--bind",
                                  coord,
                                  "--servers",
                                  std::to_string(opt_.servers),
                                  "--workers",
                                  std::to_string(opt_.workers),
                                  "--model",
                                  opt_.model,
                                  "--mode",
                                  opt_.mode,
                                  "--policy",
                                  opt_.policy,
                                  "--comm",
                                  opt_.comm,
                                  "--comm-bandwidth",
                                  opt_.bandwidth.empty() ? "0" : opt_.bandwidth,
                                  "--slice-params",
                                  std::to_string(opt_.slice_params),
                                  "--partition-params",
                                  std::to_string(opt_.partition_params),
                                  "--epochs",
                                  std::to_string(opt_.epochs),
                                  "--steps",
                                  std::to_string(opt_.steps),
                                  "--batch",
                                  std::to_string(opt_.batch),
                                  "--lr",
                                  exact(opt_.lr),
                                  "--momentum",
                                  exact(opt_.momentum),
                                  "--weight-decay",
                                  exact(opt_.weight_decay),
                                  "--lr-schedule",
                                  opt_.lr_schedule,
                                  "--seed",
                                  std::to_string(opt_.seed),
                                  "--partition-bytes",
                                  opt_.partition_bytes,
                                  "--heartbeat",
                                  exact(opt_.heartbeat_s),
                                  "--heartbeat-timeout",
                                  exact(opt_.heartbeat_timeout_s),
                                  "--stall-timeout",
                                  exact(opt_.stall_timeout_s),
                                  "--summary",
                                  out_ + "/summary.json",
                                  "--endpoint-file",
                                  endpoint_file,
                                  "--compute",
                                  opt_.compute,
                                  "--log-file",
                                  out_ + "/logs/coordinator.log"};
    if (!opt_.credit.empty()) a.insert(a.end(), {"--credit", opt_.credit});
    if (opt_.allow_nonfinite) a.push_back("--allow-nonfinite");
    if (opt_.push_pull) a.push_back("--push-pull");
    if (opt_.connections > 1)
      a.insert(a.end(), {"--connections", std::to_string(opt_.connections)});
    if (!opt_.checkpoint_every.empty())
      a.insert(a.end(), {"--checkpoint-every", opt_.checkpoint_every});
    if (resume_step_ > 0) a.insert(a.end(), {"--resume-step", std::to_string(resume_step_)});
    if (opt_.replicas > 1) a.insert(a.end(), {"--replicas", std::to_string(opt_.replicas)});
    if (!opt_.http.empty())
      a.insert(a.end(), {"--http", opt_.http, "--http-file", out_ + "/logs/coordinator.http"});
    if (!opt_.http_token.empty()) a.insert(a.end(), {"--http-token", opt_.http_token});
    if (!opt_.profile.empty()) a.insert(a.end(), {"--profile", opt_.profile});
    if (!keys_.empty()) a.insert(a.end(), {"--keys", keys_});
    return a;
  }

  std::vector<std::string> server_args(const std::string& coord, int i) const {
    auto a = common(coord, "server-" + std::to_string(i));
    a.insert(a.begin(), "server");
    a.insert(a.end(), {"--bind", "tcp://" + host_of("server-" + std::to_string(i)) + ":*",
                       "--apply-threads", std::to_string(opt_.apply_threads)});
    if (opt_.connections > 1) a.insert(a.end(), {"--io-threads", std::to_string(opt_.connections)});
    if (!opt_.checkpoint_every.empty() || resume_step_ > 0)
      a.insert(a.end(), {"--checkpoint-dir", out_ + "/checkpoints"});
    return a;
  }

  std::vector<std::string> worker_args(const std::string& coord, int i) const {
    auto a = common(coord, "worker-" + std::to_string(i));
    a.insert(a.begin(), "worker");
    a.insert(a.end(),
             {"--model", opt_.model, "--data", opt_.data, "--threads", std::to_string(opt_.threads),
              "--device", opt_.device, "--compute", opt_.compute, "--peer-bind",
              "tcp://" + host_of("worker-" + std::to_string(i)) + ":*"});
    if (!opt_.data_dir.empty()) a.insert(a.end(), {"--data-dir", opt_.data_dir});
    if (!opt_.save_params.empty()) a.insert(a.end(), {"--save-params", opt_.save_params});
    if (i == 0 && opt_.straggler_ms > 0)
      a.insert(a.end(), {"--straggle-ms", std::to_string(opt_.straggler_ms)});
    Straggler own = straggler_of(stragglers_, i);
    if (opt_.netns) own.bandwidth_bytes_per_sec = 0;  // tc shapes its veth instead
    if (const std::string keys = straggler_keys(own); !keys.empty())
      a.insert(a.end(), {"--straggler", keys});
    if (opt_.start_stagger_ms > 0)
      a.insert(a.end(), {"--start-stagger-ms", std::to_string(opt_.start_stagger_ms)});
    a.insert(a.end(), opt_.worker_args.begin(), opt_.worker_args.end());
    return a;
  }

  void spawn(const std::string& name, const std::string& role, const std::vector<std::string>& args,
             bool to_log) {
    Child c;
    c.name = name, c.role = role, c.log = out_ + "/logs/" + name + ".log";
    std::vector<std::string> argv = {"/proc/self/exe"};
    argv.insert(argv.end(), args.begin(), args.end());
    const pid_t parent = ::getpid();
    pid_t pid = ::fork();
    if (pid < 0) throw Error("fork failed starting " + name);
    if (pid == 0) {
      // Child: die with the launcher, restore signals, send its output to its log (the
      // coordinator's stays on the terminal: it writes its log file itself, --log-file).
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != parent) ::_exit(1);
      ::setpgid(0, 0);
      if (netns_ && !netns_->enter(name)) {
        std::fprintf(stderr, "cannot enter the network namespace of %s: %s\n", name.c_str(),
                     std::strerror(errno));
        ::_exit(126);
      }
      sigprocmask(SIG_SETMASK, &stops_->old_mask(), nullptr);
      int fd = to_log ? ::open(c.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644) : -1;
      if (fd >= 0) {
        ::dup2(fd, STDOUT_FILENO);
        ::dup2(fd, STDERR_FILENO);
        ::close(fd);
      }
      std::vector<char*> cargv;
      for (auto& s : argv) cargv.push_back(const_cast<char*>(s.c_str()));
      cargv.push_back(nullptr);
      if (role == "worker") ::setenv("OMP_WAIT_POLICY", "passive", 0);
      ::execv("/proc/self/exe", cargv.data());
      ::_exit(127);
    }
    c.pid = pid;
    children_.push_back(c);
  }

  Child* find(pid_t pid) {
    for (auto& c : children_)
      if (c.pid == pid) return &c;
    return nullptr;
  }

  int running() const {
    int n = 0;
    for (const auto& c : children_) n += c.running;
    return n;
  }

  void signal_all(int sig) {
    for (auto& c : children_)
      if (c.running) ::kill(c.pid, sig);
  }

  // Ends a run early keeping what it measured: the coordinator, told to stop (SIGTERM), stops
  // the workers, which report their steps so far and write their traces, writes the summary
  // and shuts the shards down; whatever is still running after that is stopped. With the
  // coordinator already dead (killed) nothing would tell the nodes: they are stopped at once.
  // A second Ctrl-C stops everything at once; so does the coordinator being gone for 5 s. One
  // Ctrl-C can come more than once within milliseconds (`timeout psbed launch` in a terminal: the
  // terminal signals both, and timeout passes its signal on to the launcher and to its group):
  // after an interruption (`interrupted`), a repeat within kRepeatGraceS is the same Ctrl-C, not
  // a second one. Past --timeout any Ctrl-C is the user's.
  void wind_down(bool interrupted) {
    bool told = false;  // a coordinator there to stop the nodes; a dead one tells them nothing
    for (auto& c : children_)
      if (c.running && c.role == "coordinator") ::kill(c.pid, SIGTERM), told = true;
    if (!told) return stop_all(3);  // stopped by their own SIGTERM: each writes its trace
    using Clock = std::chrono::steady_clock;
    constexpr double kRepeatGraceS = 0.5;
    const auto began = Clock::now();
    const auto deadline = began + std::chrono::seconds(15);
    Clock::time_point coordinator_gone{};
    std::string ignored;
    while (running() > 0 && Clock::now() < deadline) {
      reap(ignored);
      bool coordinator = false;
      for (const auto& c : children_)
        coordinator = coordinator || (c.running && c.role == "coordinator");
      if (!coordinator && coordinator_gone == Clock::time_point{}) coordinator_gone = Clock::now();
      if (!coordinator && Clock::now() - coordinator_gone > std::chrono::seconds(5)) break;
      const int sig = stops_->wait(0.02);
      if (stops_->is_stop(sig) &&
          (!interrupted || Clock::now() - began > std::chrono::duration<double>(kRepeatGraceS))) {
        spdlog::warn("interrupted again: stopping every process now");
        break;
      }
    }
    stop_all(3);
  }

  // A setting the run's policy does not use is kept (a switch to a policy that uses it, from the
  // dashboard or `psbed ctl`, takes it), but said, since it changes nothing until then.
  void warn_unused_policy_settings() const {
    const std::string& n = opt_.policy;
    const bool sliced = policy::uses_slice_params(n), credited = policy::uses_credit(n);
    const LaunchOptions defaults;
    auto warn = [&](const std::string& flag, const char* users) {
      spdlog::warn(
          "{}: policy {} does not use it ({}); it applies only if the run switches to one of those",
          flag, n, users);
    };
    if (!opt_.credit.empty() && !credited)
      warn("--credit " + opt_.credit,
           "p3 and bytescheduler: bytes in flight; prophet: largest block");
    if (opt_.slice_params != defaults.slice_params && !sliced)
      warn("--slice-params " + std::to_string(opt_.slice_params), "p3, prophet");
    if (opt_.partition_params != defaults.partition_params && !policy::uses_partition_params(n))
      warn("--partition-params " + std::to_string(opt_.partition_params), "bytescheduler");
  }

  // Reaps whatever exited; returns false if the run must stop.
  bool reap(std::string& failure) {
    bool ok = true;
    for (;;) {
      int status = 0;
      double cpu_s = -1;
      pid_t pid = reap_child(-1, &status, WNOHANG, &cpu_s);
      if (pid <= 0) break;
      Child* c = find(pid);
      if (!c) continue;
      c->running = false;
      c->status = status;
      c->cpu_s = cpu_s;
      const bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (c->role == "coordinator") {
        coordinator_done_ = true;
        if (!clean) {
          // One that exits 1 after its summary says why the run failed there.
          failure =
              summary_failure(out_ + "/summary.json", "coordinator " + describe_status(status));
          ok = false;
          // A coordinator that wrote no summary did not end the run itself (killed, or it failed
          // to start): it is the process that failed. One that exits 1 after its summary reports
          // a failed run, whose nodes the summary names.
          if (!fs::exists(out_ + "/summary.json"))
            failed_.push_back(
                {{"name", c->name}, {"role", c->role}, {"reason", describe_status(status)}});
        }
      } else if (!clean && !coordinator_done_) {
        const std::string why = c->name + " " + describe_status(status);
        failed_.push_back(
            {{"name", c->name}, {"role", c->role}, {"reason", describe_status(status)}});
        spdlog::error("{}; last lines of {}:\n{}", why, c->log, tail_of(c->log, 5));
        // A shard is always needed; a worker that never joined leaves the coordinator waiting
        // for it until the registration timeout (a bad --data-dir, say): both end the run now.
        // With --replicas 2 the coordinator decides: the next shard takes over, or the run ends.
        if (c->role == "server" &&
            !(opt_.replicas > 1 &&
              tell_node_gone(coord_, keys_, opt_.http_token, c->name, describe_status(status)))) {
          failure = why;
          ok = false;
        } else if (!log_mentions(c->log, "registered with the coordinator")) {
          failure = why + " before it joined the cluster";
          ok = false;
        }
      }
    }
    return ok;
  }

  void stop_all(double grace_s) {
    signal_all(SIGTERM);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s);
    std::string ignored;
    while (running() > 0 && std::chrono::steady_clock::now() < deadline) {
      reap(ignored);
      if (running() > 0) ::usleep(20000);
    }
    if (running() > 0) {
      signal_all(SIGKILL);
      while (running() > 0) {
        int status;
        double cpu_s = -1;
        pid_t pid = reap_child(-1, &status, 0, &cpu_s);
        if (pid <= 0) break;
        if (Child* c = find(pid)) c->running = false, c->status = status, c->cpu_s = cpu_s;
      }
    }
  }

  // The coordinator's last stall line in its log ("no progress for 30 s: worker-0 at step 8
  // waiting on ..."), or "": a run past --timeout that stalled says where.
  std::string last_stall() const {
    std::ifstream in(out_ + "/logs/coordinator.log");
    std::string line, stall;
    while (std::getline(in, line))
      if (const auto at = line.find("no progress for "); at != std::string::npos)
        stall = line.substr(at);
    return stall;
  }

  int supervise() {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(opt_.timeout_s);
    std::string failure;
    while (running() > 0) {
      const int sig = stops_->wait(1.0);
      if (stops_->is_stop(sig)) {
        spdlog::warn("interrupted{}: the run ends now, keeping what it measured",
                     sig == SIGHUP ? " (hangup: the terminal closed)" : "");
        wind_down(true);
        failure_ = sig == SIGHUP ? "interrupted (hangup)" : "interrupted";
        return 130;
      }
      if (!reap(failure)) {
        spdlog::error("stopping the run: {}", failure);
        wind_down(false);
        failure_ = failure;
        return 1;
      }
      if (coordinator_done_ && running() > 0) {
        // The coordinator told everyone to shut down: give them time to write their traces.
        if (coordinator_done_at_ == std::chrono::steady_clock::time_point{})
          coordinator_done_at_ = std::chrono::steady_clock::now();
        if (std::chrono::steady_clock::now() - coordinator_done_at_ > std::chrono::seconds(15)) {
          spdlog::warn(
              "{} process(es) still running 15 s after the coordinator ended: stopping them",
              running());
          stop_all(3);
        }
      }
      if (std::chrono::steady_clock::now() > deadline) {
        failure_ =
            "the run took longer than --timeout " + std::to_string(int(opt_.timeout_s)) + " s";
        if (const std::string stall = last_stall(); !stall.empty())
          failure_ += "; it had stalled: " + stall;
        spdlog::error("{}: ending it, keeping what it measured", failure_);
        wind_down(false);
        return 1;
      }
    }
    for (const auto& c : children_)
      if (c.role == "coordinator") return WIFEXITED(c.status) ? WEXITSTATUS(c.status) : 1;
    return 1;
  }

  int finish(int rc) {
    nlohmann::json netns_json;
    if (netns_) {
      // Every process is gone by now; the namespaces (and with them the veths and the bridge) go
      // too.
      netns_json = {
          {"namespaces", netns_->namespaces()},
          {"addresses", addresses_},
          {"shaping",
           opt_.bandwidth.empty() ? "none" : "tc tbf " + opt_.bandwidth + " per direction"}};
      netns_->remove_all();
      std::remove((out_ + "/logs/coordinator.netns").c_str());
    }
    const std::string path = out_ + "/summary.json";
    nlohmann::json s;
    if (std::ifstream in(path); in) {
      try {
        s = nlohmann::json::parse(in);
      } catch (const std::exception&) {
      }
    }
    if (!s.is_object()) s = unwritten_summary();
    if (!s.is_object())
      s = {{"model", opt_.model}, {"workers", opt_.workers}, {"servers", opt_.servers},
           {"mode", opt_.mode},   {"policy", opt_.policy},   {"ok", false}};
    nlohmann::json procs = nlohmann::json::array();
    for (const auto& c : children_)
      procs.push_back({{"name", c.name},
                       {"role", c.role},
                       {"pid", c.pid},
                       {"status", describe_status(c.status)},
                       {"cpu_s", c.cpu_s >= 0 ? nlohmann::json(c.cpu_s) : nlohmann::json()},
                       {"log", c.log}});
    s["launch"] = {{"processes", procs},
                   {"failed_processes", failed_},
                   {"out", out_},
                   {"host_cpus", ::sysconf(_SC_NPROCESSORS_ONLN)},
                   // The link every node had, in the words of the traces' metadata (psbed
                   // validate reads it here when the run has no traces); with --netns tc
                   // shaped the bandwidth.
                   {"link", link_.str()},
                   {"straggler_ms", opt_.straggler_ms > 0 ? opt_.straggler_ms : 0.0},
                   {"stragglers", stragglers_json(stragglers_)},
                   {"start_stagger_ms", opt_.start_stagger_ms > 0 ? opt_.start_stagger_ms : 0.0},
                   {"apply_threads", opt_.apply_threads},
                   {"connections", opt_.connections},
                   // How each worker computed (the summary's data, seed and optimizer are the
                   // coordinator's).
                   {"threads", opt_.threads},
                   {"device", opt_.device},
                   {"data_dir", opt_.data_dir}};
    if (!netns_json.is_null()) s["launch"]["netns"] = netns_json;
    if (!failure_.empty()) s["ok"] = false, s["failure"] = failure_;
    // The nodes this launcher saw die, where the coordinator did not (launch ends the run at
    // once when a shard dies, before any heartbeat is missed): failed_nodes names every one.
    if (!failed_.empty()) {
      nlohmann::json& nodes = s["failed_nodes"];
      if (!nodes.is_array()) nodes = nlohmann::json::array();
      for (const auto& f : failed_) {
        const bool named = std::any_of(nodes.begin(), nodes.end(), [&](const nlohmann::json& n) {
          return n.is_object() && n.value("name", "") == f["name"];
        });
        if (!named) nodes.push_back(f);
      }
    }
    // A summary that cannot be written (--out made read-only, a full disk) is an error that says
    // so; what the run measured is still printed below.
    bool written = true;
    try {
      write_text_file(path, s.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    } catch (const std::exception& e) {
      spdlog::error("the summary: {} (the results below are all that is kept)", e.what());
      written = false;
      rc = rc ? rc : 1;
    }
    if (written)
      std::printf("\n== summary (%s) ==\n", path.c_str());
    else
      std::printf("\n== results (not written: %s could not be) ==\n", path.c_str());
    std::printf("model %s, %d worker(s), %d server(s), mode %s, policy %s%s%s\n",
                opt_.model.c_str(), opt_.workers, opt_.servers, opt_.mode.c_str(),
                opt_.policy.c_str(), opt_.compute == "real" ? "" : ", compute ",
                opt_.compute == "real" ? "" : opt_.compute.c_str());
    print_comm_routes(opt_.comm, s);
    for (const auto& sw : s.value("policy_switches", nlohmann::json::array()))
      std::printf("policy switched to %s at step %s\n",
                  sw.value("describe", std::string("?")).c_str(),
                  sw.value("step", nlohmann::json(-1)).dump().c_str());
    if (s.contains("images_per_sec"))
      std::printf("throughput: %.2f steps/s, %.0f images/s (aggregate, steady state)\n",
                  s.value("steps_per_sec", 0.0), s.value("images_per_sec", 0.0));
    if (s.contains("test_accuracy") && !s["test_accuracy"].is_null())
      std::printf("test accuracy: %.2f%%\n", 100 * s["test_accuracy"].get<double>());
    if (opt_.compute == "real") print_losses(s.value("per_worker", nlohmann::json::array()));
    for (const auto& f : s.value("failed_nodes", nlohmann::json::array()))
      std::printf("failed: %s (%s)\n", f.value("name", "?").c_str(),
                  f.value("reason", "?").c_str());
    if (!failure_.empty()) std::printf("run failed: %s\n", failure_.c_str());
    if (opt_.trace)
      std::printf(
          "traces: %s/traces/ (open them together in Perfetto, ui.perfetto.dev, or "
          "chrome://tracing)\n",
          out_.c_str());
    std::printf("logs: %s/logs/\n", out_.c_str());
    std::fflush(stdout);
    return rc;
  }

  // The summary a coordinator could not write (ps/coordinator_summary.cpp logs it instead, on
  // one line after kUnwrittenSummary): what the workers reported, kept. Null if there is none.
  nlohmann::json unwritten_summary() const {
    for (const auto& c : children_) {
      if (c.role != "coordinator") continue;
      std::ifstream in(c.log);
      nlohmann::json found;
      for (std::string line; std::getline(in, line);) {
        const auto at = line.find(ps::kUnwrittenSummary);
        if (at == std::string::npos) continue;
        found =
            nlohmann::json::parse(line.substr(at + ps::kUnwrittenSummary.size()), nullptr, false);
      }
      if (found.is_object()) return found;
    }
    return nullptr;
  }

  // The loss at the first step and the last, per worker (one batch each), and whether it fell:
  // a run whose loss ends above half its first value, or not a number, did not converge. Async
  // with a learning rate one process takes does that (docs/concepts.md, "Consistency").
  void print_losses(const nlohmann::json& per_worker) const {
    double first = 0, lo = INFINITY, hi = -INFINITY, sum = 0;
    int n = 0;
    bool not_a_number = false;
    for (const auto& w : per_worker) {
      // Died, sent no report, or did no step (a run interrupted at once).
      if (!w.contains("first_loss") || !w.contains("final_loss") || w.value("steps", 0) < 1)
        continue;
      const auto& f = w["final_loss"];  // a NaN or an infinity is written as null
      if (!f.is_number() || !std::isfinite(f.get<double>())) {
        not_a_number = true;
        continue;
      }
      first += w.value("first_loss", 0.0), sum += f.get<double>(), ++n;
      lo = std::min(lo, f.get<double>()), hi = std::max(hi, f.get<double>());
    }
    if (n == 0 && !not_a_number) return;
    const std::string hint = opt_.lr <= 0 ? "an --lr above 0 (with 0 nothing is learnt)"
                             : opt_.mode == "bsp"
                                 ? "more steps or another --lr"
                                 : "a smaller --lr (docs/concepts.md, \"Consistency\")";
    if (not_a_number) {
      std::printf("loss: not a number at the last step: training diverged; try %s\n", hint.c_str());
      return;
    }
    first /= n;
    std::printf("loss: %.3f at the first step, %.3f", first, lo);
    if (hi > lo) std::printf(" to %.3f", hi);
    std::printf(" at the last (per worker, one batch each)\n");
    if (sum / n > first / 2)
      std::printf("the loss fell by less than half: training did not converge; try %s\n",
                  hint.c_str());
  }

  LaunchOptions opt_;
  ps::LinkOptions link_;               // --bandwidth and --latency, read once
  std::vector<Straggler> stragglers_;  // --straggler, read once
  std::string out_, coord_;            // the run folder; the coordinator's endpoint
  std::int64_t resume_step_ = 0;       // --resume: the checkpoint's step
  // Held from the first node's start to the summary (ps/stop_signals.hpp).
  std::optional<ps::BlockedStopSignals> stops_;
  std::vector<Child> children_;
  std::unique_ptr<NetnsTestbed> netns_;
  std::map<std::string, std::string> addresses_;  // node -> address (--netns)
  std::string keys_;                              // --secure: the key folder every node uses
  nlohmann::json failed_ = nlohmann::json::array();
  bool coordinator_done_ = false;
  std::chrono::steady_clock::time_point coordinator_done_at_{};
  std::string failure_;
};

}  // namespace

int run_launch(const LaunchOptions& opt) {
  Launcher l(opt);
  return l.run();
}

}  // namespace psbed::cluster
