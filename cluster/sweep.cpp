#include "cluster/sweep.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "cluster/cli_config.hpp"
#include "cluster/sweep_parts.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "ps/stop_signals.hpp"

namespace psbed::cluster {
namespace fs = std::filesystem;
using namespace sweep_detail;

namespace sweep_detail {

// Runs `psbed launch` for one point, its output into LOG. Returns its exit status (130: Ctrl-C,
// or a closed terminal). A stop the sweep takes meanwhile (Ctrl-C, SIGTERM or a hang-up sent to
// the sweep alone: `kill PID`, not the terminal's whole group) reaches the launch as well: it
// winds its cluster down and keeps what it measured, and the sweep stops after it with what it
// has. (A launch signalled twice within a moment, by the terminal and by this, takes it as one
// interruption.) The launch is signalled only before it is reaped: its pid is never another's.
int run_launch_child(const std::vector<std::string>& args, const std::string& log,
                     ps::BlockedStopSignals& stops) {
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

}  // namespace sweep_detail

namespace {

// The runs so far: a row each, and what the closing lines and the exit status say.
struct Progress {
  json rows = json::array();
  int done = 0, failed = 0, ran = 0;
  bool interrupted = false;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
};

// Runs the grid's points in order (or keeps a finished one, with --resume), a row each into
// `csv` as it ends; stops before the next point once the sweep is told to stop.
Progress run_grid(const SweepOptions& opt, const std::vector<Point>& grid,
                  ps::BlockedStopSignals& stops, std::ostream& csv) {
  const LaunchOptions& base = opt.base;
  const std::string& out = base.out;
  Progress run;
  for (const Point& p : grid) {
    while (stops.poll() != 0) {
    }
    if (stops.received() != 0) {  // between two launches
      run.interrupted = true;
      spdlog::warn("interrupted ({}): stopping the sweep before {}", strsignal(stops.received()),
                   p.folder());
      break;
    }
    LaunchOptions o = base;
    o.workers = p.workers, o.servers = p.servers, o.mode = p.mode, o.policy = p.policy,
    o.bandwidth = p.bandwidth;
    o.out = out + "/" + p.folder();
    json s;
    std::string failure;
    if (opt.resume && finished_ok(s = read_summary(o.out + "/summary.json"))) {
      spdlog::info("[{}/{}] {}: kept (finished earlier)", run.done + 1, grid.size(), p.folder());
    } else {
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - run.t0).count();
      std::string eta;
      if (run.ran > 0)
        eta = ", about " + hms(elapsed / run.ran * double(grid.size() - run.done)) + " left";
      const std::string rep = opt.repeat > 1 ? ", repeat " + std::to_string(p.repeat) : "";
      spdlog::info("[{}/{}] {} {} {} {} server(s) {} worker(s){} ... (elapsed {}{})", run.done + 1,
                   grid.size(), p.mode, p.policy, p.bandwidth.empty() ? "unshaped" : p.bandwidth,
                   p.servers, p.workers, rep, hms(elapsed), eta);
      if (fs::exists(
              o.out)) {  // a failed run of this point (--resume): kept beside, not overwritten
        const std::string aside = failed_aside(o.out);
        fs::rename(o.out, aside);
        spdlog::info("{}: the earlier failed run moved to {}", p.folder(), aside);
      }
      fs::create_directories(o.out);
      const int rc = run_launch_child(launch_args(o), o.out + "/launch.log", stops);
      ++run.ran;
      s = read_summary(o.out + "/summary.json");
      if (rc == 130 || (stops.received() != 0 && rc != 0)) {
        run.interrupted = true;
        spdlog::warn("interrupted during {}: stopping the sweep", p.folder());
        break;
      }
      failure = run_failure(s);
      if (failure.empty() && rc != 0) failure = "launch exited with status " + std::to_string(rc);
      if (!failure.empty()) {
        ++run.failed;
        // What it measured is said, so a survivors' figure is seen for what it is, and not counted.
        std::string measured;
        if (s.is_object() && s.value("images_per_sec", 0.0) > 0)
          measured = fmt::format(" ({:.1f} images/s measured, not counted)",
                                 s.value("images_per_sec", 0.0));
        spdlog::error("[{}/{}] {} failed: {}{}; see {}/launch.log", run.done + 1, grid.size(),
                      p.folder(), failure, measured, o.out);
      } else {
        // With repeats: the point's earlier runs beside this one, so a second pace shows at once.
        std::string others;
        for (const auto& r : run.rows)
          if (r["point"] == p.name && r["ok"].get<bool>()) {
            char buf[32];
            std::snprintf(buf, sizeof buf, "%s%.1f", others.empty() ? "" : ", ",
                          r["images_per_sec"].get<double>());
            others += buf;
          }
        spdlog::info("[{}/{}] {}: {:.1f} images/s, {:.2f} steps/s{}", run.done + 1, grid.size(),
                     p.folder(), s.value("images_per_sec", 0.0), s.value("steps_per_sec", 0.0),
                     others.empty() ? "" : " (earlier repeats: " + others + ")");
      }
    }
    run.rows.push_back(result_row(p, o, s, failure));
    csv << csv_row(o, run.rows.back()) << std::flush;
    ++run.done;
  }
  return run;
}

}  // namespace

void add_sweep(CLI::App& root, SweepOptions& o, std::string& log_level) {
  auto* app = root.add_subcommand(
      "sweep", "Run a grid of cluster launches into one folder, with results.csv and a plot");
  app->footer(
      "Example: psbed sweep --model vgg-mini --data synthetic --workers 1,2,4,8 --policy all "
      "--mode bsp,async \\\n"
      "           --bandwidth 1gbit --compute replay:profile.json --steps 30 --out "
      "runs/sweep-NAME\n"
      "Each point is a `psbed launch` into OUT/<mode>-<policy>-<bandwidth>-<S>s<N>w/ (its output "
      "in launch.log);\n"
      "with --repeat K its repeats go to <point>-r2/ ... <point>-rK/, one round of the grid after "
      "the other.\n"
      "OUT/results.csv and results.json get one row per run (images/s, steps/s, ok), results.md a "
      "table per mode\n"
      "and bandwidth (the median of each point's runs); a run that failed or lost a node (killed "
      "or stopped) has\n"
      "ok 0, failed_nodes and failure beside what it measured, and stays out of results.md's cells "
      "and the plot.\n"
      "OUT/sweep.png plots "
      "images/s against workers, a line per policy (matplotlib: cluster/install-deps.sh plot). "
      "Ctrl-C (or SIGTERM\n"
      "to the sweep alone) stops the run in flight and the sweep, keeping what finished; --resume "
      "keeps finished runs on a second call\n"
      "(in every results file, those outside its grid too) and runs the others again (each failed "
      "attempt kept as <point>.failed/, .failed-2/, ...), so\n"
      "--resume --repeat 3 adds two repeats to a finished sweep. A short run can settle in one of "
      "two paces\n"
      "(workers in step or out of step on a shared link): repeats show it, and `psbed validate` "
      "compares a\n"
      "prediction with the median of a point's repeats.");
  add_config_option(app);
  app->add_option("--log-level", log_level, "trace, debug, info, warn or error")
      ->capture_default_str();
  LaunchOptions& b = o.base;
  app->add_option("--workers", o.workers, "worker counts, e.g. 1,2,4,8")
      ->delimiter(',')
      ->capture_default_str();
  app->add_option("--servers", o.servers, "server shard counts")
      ->delimiter(',')
      ->capture_default_str();
  app->add_option("--policy", o.policies, "policies, or all")
      ->delimiter(',')
      ->capture_default_str();
  app->add_option("--mode", o.modes, "consistency modes: async, bsp, ssp:K")
      ->delimiter(',')
      ->capture_default_str();
  app->add_option("--bandwidth", o.bandwidths,
                  "link rates per direction, e.g. 100mbit,1gbit; 0 or unshaped: unshaped (the "
                  "default), as in 0,1gbit")
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
  app->add_option("--out", b.out, "folder for every run, results.csv, results.json and sweep.png")
      ->required();
  app->add_option("--repeat", o.repeat,
                  "runs per point (median and range in results.md, validate uses the median)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  app->add_flag("--resume", o.resume,
                "keep runs that already finished in OUT (refused where one ran with other "
                "settings; a policy's "
                "settings count for the kept runs of the policies this call runs)");
  app->add_flag("!--no-plot", o.plot, "skip sweep.png");
  app->add_option("--model", b.model, "model name or .toml path")->capture_default_str();
  app->add_option("--comm", b.comm,
                  "ps, sfb or hybrid for every run: how fc layers travel (docs/communication.md)")
      ->capture_default_str();
  app->add_option("--data", b.data, "mnist or synthetic")->capture_default_str();
  app->add_option("--data-dir", b.data_dir, "directory with IDX files");
  app->add_option("--compute", b.compute,
                  "real, or replay:<profile.json> (how 8+ workers fit on a small machine)")
      ->capture_default_str();
  app->add_option("--steps", b.steps, "steps per worker per run")->capture_default_str();
  app->add_option("--epochs", b.epochs, "passes over the data per run (when --steps is 0)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app->add_option("--batch", b.batch, "batch per worker")->capture_default_str();
  app->add_option("--lr", b.lr,
                  "learning rate, constant over each run (a sweep measures throughput; launch's "
                  "own default schedule is cosine)")
      ->capture_default_str()
      ->check(non_negative("a learning rate", true));
  app->add_option("--threads", b.threads, "compute threads per worker")->capture_default_str();
  app->add_option("--device", b.device, "cpu or gpu (every worker of every run)")
      ->capture_default_str();
  app->add_flag("--push-pull", b.push_pull,
                "each push answered with the updated part (launch --push-pull)");
  app->add_option("--connections", b.connections,
                  "connections from each worker to each shard, large parts striped over them "
                  "(launch --connections)")
      ->capture_default_str()
      ->check(CLI::Range(1, 8));
  app->add_option("--apply-threads", b.apply_threads, "threads applying updates per server shard")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app->add_option("--seed", b.seed, "seed")->capture_default_str()->transform(seed_validator());
  app->add_option("--partition-bytes", b.partition_bytes, "largest part a tensor is cut into")
      ->capture_default_str()
      ->check(size_value());
  app->add_option("--slice-params", b.slice_params, "p3, prophet: parameters per slice")
      ->capture_default_str();
  app->add_option("--partition-params", b.partition_params,
                  "bytescheduler: parameters per partition")
      ->capture_default_str();
  app->add_option(
         "--credit", b.credit,
         "p3/bytescheduler credit, prophet block limit (default, or 'default': each policy's)")
      ->transform(credit_value());
  app->add_option("--latency", b.latency, "emulated one-way latency of every link, e.g. 200us")
      ->check(duration_value());
  app->add_flag("--netns", b.netns,
                "shape with tc in one network namespace per node (root) instead of in-process");
  as_duration(app->add_option("--timeout", b.timeout_s, "seconds each run may take"), "s")
      ->capture_default_str();
  app->add_flag("!--no-trace", b.trace, "do not write traces");
}
int run_sweep(SweepOptions opt) {
  check_grid(opt);
  const std::vector<Point> grid = make_grid(opt);
  const LaunchOptions& base = opt.base;
  const std::string out = base.out;
  {
    LaunchOptions first = base;  // the settings every point shares, refused before any run
    first.workers = grid.front().workers, first.servers = grid.front().servers;
    first.mode = grid.front().mode, first.policy = grid.front().policy,
    first.bandwidth = grid.front().bandwidth;
    // The most shards any point asks for: each must hold a part of the model.
    first.servers = *std::max_element(opt.servers.begin(), opt.servers.end());
    check_launch_options(first);
  }
  ensure_writable_dir(out, "--out");
  if (!opt.resume && fs::exists(out + "/results.csv"))
    throw Error(
        "--out " + out +
        " holds a sweep already (results.csv): --resume continues it, or give another --out");
  check_kept_runs(opt);
  spdlog::info("sweep of {} runs ({} points x {} repeat(s)) of {} into {} ({} compute)",
               grid.size(), grid.size() / std::size_t(opt.repeat), opt.repeat, base.model, out,
               base.compute);

  // The sweep outlives Ctrl-C: the launch in flight gets it too (from the terminal, or from
  // run_launch_child when only the sweep was signalled), stops its cluster and exits 130, after
  // which the sweep stops with what it has. So on SIGTERM, and on a closed terminal (SIGHUP,
  // unless the sweep runs under nohup): the launch winds down, the sweep writes its results.
  std::optional<ps::BlockedStopSignals> stops;
  stops.emplace(true, std::initializer_list<int>{SIGCHLD});

  std::ofstream csv(out + "/results.csv");
  csv << kCsvHeader;
  Progress run = run_grid(opt, grid, *stops, csv);
  // --resume with a smaller or another grid, or stopped before the end: the finished runs in
  // OUT that this call did not visit stay in the results, after its own rows (read from their
  // folders, which --resume checked were run with this sweep's settings).
  if (opt.resume) carry_kept_runs(opt, run.rows, csv);
  stops.reset();
  write_results(opt, run.rows);
  spdlog::info(
      "{} of {} runs done ({} failed) in {}: {}/results.csv", run.done, grid.size(), run.failed,
      hms(std::chrono::duration<double>(std::chrono::steady_clock::now() - run.t0).count()), out);
  if (opt.plot && run.done > 0) plot_results(out);
  if (run.interrupted) return 130;
  return run.failed == 0 ? 0 : 1;
}

}  // namespace psbed::cluster
