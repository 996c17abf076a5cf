#include "ps/bench_coordinator.hpp"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/trace.hpp"
#include "ps/protocol.hpp"

namespace psbed::ps {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

double secs(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
Clock::duration dur(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// ---- the coordinator, a child process -------------------------------------------------------

// A field of /proc/PID/status in KiB (VmRSS, VmHWM); 0 where it cannot be read.
long status_kib(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.compare(0, field.size() + 1, field + ":") == 0)
      return std::strtol(line.c_str() + field.size() + 1, nullptr, 10);
  return 0;
}

// User + system CPU seconds of the process so far (/proc/PID/stat fields 14 and 15).
double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto paren = all.rfind(')');
  if (paren == std::string::npos) return 0;
  std::istringstream rest(all.substr(paren + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i)
    if (i >= 14) ticks += std::strtod(field.c_str(), nullptr);
  return ticks / double(sysconf(_SC_CLK_TCK));
}

class ChildCoordinator {
 public:
  ChildCoordinator(const BenchCoordinatorOptions& opt, const std::string& dir) : dir_(dir) {
    const std::string endpoint_file = dir + "/endpoint", log = dir + "/coordinator.log";
    char hb[32], timeout[32];
    std::snprintf(hb, sizeof hb, "%g", opt.heartbeat_s);
    // The coordinator's default timeout at the default interval; at a longer interval, six.
    std::snprintf(timeout, sizeof timeout, "%g",
                  std::max(defaults::kHeartbeatTimeoutS, 6 * opt.heartbeat_s));
    // No stall report (the fake workers never step) and a run too long to end by itself.
    std::vector<std::string> args = {"/proc/self/exe",
                                     "coordinator",
                                     "--bind",
                                     "tcp://127.0.0.1:*",
                                     "--endpoint-file",
                                     endpoint_file,
                                     "--servers",
                                     "1",
                                     "--workers",
                                     std::to_string(opt.workers),
                                     "--steps",
                                     "1000000000",
                                     "--stall-timeout",
                                     "0",
                                     "--heartbeat",
                                     hb,
                                     "--heartbeat-timeout",
                                     timeout,
                                     "--register-timeout",
                                     "300",
                                     "--log-level",
                                     "warn"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ < 0) throw Error("bench coordinator: cannot start the coordinator: fork failed");
    if (pid_ == 0) {
      // It dies with this process, however this one ends.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (std::FILE* f = std::freopen(log.c_str(), "w", stderr); f == nullptr) ::_exit(127);
      ::dup2(2, 1);
      ::execv("/proc/self/exe", argv.data());
      ::_exit(127);
    }
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (endpoint_.empty()) {
      if (!alive())
        throw Error("bench coordinator: the coordinator exited at start: " + log_tail());
      if (Clock::now() > deadline)
        throw Error("bench coordinator: the coordinator did not listen within 30 s");
      std::ifstream in(endpoint_file);
      std::getline(in, endpoint_);
      if (endpoint_.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ~ChildCoordinator() {
    // Killed, not stopped: the fake workers would not report, and a stopped coordinator waits
    // for their reports. Nothing of its run is kept.
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  bool alive() {
    if (reaped_) return false;
    reaped_ = ::waitpid(pid_, nullptr, WNOHANG) == pid_;
    return !reaped_;
  }
  // The last lines of its log, for an error line.
  std::string log_tail() const {
    std::ifstream in(dir_ + "/coordinator.log");
    std::string line, last;
    while (std::getline(in, line))
      if (!line.empty()) last = line;
    return last.empty() ? "(its log is empty)" : last;
  }
  pid_t pid() const { return pid_; }
  const std::string& endpoint() const { return endpoint_; }

 private:
  std::string dir_, endpoint_;
  pid_t pid_ = -1;
  bool reaped_ = false;
};

// ---- the fake nodes -------------------------------------------------------------------------

struct Fake {
  zmq::socket_t socket;
  std::string name, register_text;
  bool worker = true, registered = false, mapped = false;
  int id = -1;
  std::uint64_t seq = 0;
  Clock::time_point next_heartbeat, register_sent;
  std::deque<Clock::time_point> in_flight;  // heartbeats sent, not yet answered: answered in order
};

struct Shared {
  std::atomic<int> registered{0}, mapped{0};
  std::atomic<bool> stop{false};
  std::atomic<std::int64_t> window_start{0}, window_end{0};  // steady ticks; 0: not yet
  std::mutex mu;
  std::string error;
  void fail(const std::string& why) {
    std::lock_guard<std::mutex> lock(mu);
    if (error.empty()) error = why;
    stop = true;
  }
};

struct ThreadResult {
  std::vector<double> latency_ms;
  std::uint64_t sent = 0, answered = 0, dropped = 0;
};

bool send_message(Fake& f, Op op, const std::string& payload) {
  Header h;
  h.op = op;
  h.sender = f.id < 0 ? 0 : std::uint32_t(f.id);
  h.sequence = ++f.seq;
  h.length = payload.size();
  const HeaderBytes bytes = encode_header(h);
  const auto more = payload.empty() ? zmq::send_flags::dontwait
                                    : zmq::send_flags::dontwait | zmq::send_flags::sndmore;
  if (!f.socket.send(zmq::const_buffer(bytes.data(), bytes.size()), more)) return false;
  if (!payload.empty())
    (void)f.socket.send(zmq::const_buffer(payload.data(), payload.size()),
                        zmq::send_flags::dontwait);
  return true;
}

class FakeThread {
 public:
  FakeThread(Shared& shared, double heartbeat_s, unsigned seed)
      : shared_(shared), interval_(dur(heartbeat_s)), rng_(seed) {}
  std::vector<Fake> fakes;
  ThreadResult result;

  // epoll on each socket's ZMQ_FD, not zmq_poll over all of them: a poll of 250 sockets per
  // answer would make this load generator, not the coordinator, the bottleneck. ZMQ_FD only
  // says "look again", so a socket is drained until it has nothing after every wake and every
  // send on it.
  void run() {
    const int ep = ::epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) return shared_.fail("epoll_create1 failed");
    for (std::size_t i = 0; i < fakes.size(); ++i) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = i;
      const int fd = fakes[i].socket.get(zmq::sockopt::fd);
      if (::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
        ::close(ep);
        return shared_.fail("epoll_ctl failed");
      }
    }
    for (Fake& f : fakes) {
      send_register(f, Clock::now());
      drain(f);
    }
    std::vector<epoll_event> ready(fakes.size());
    while (!shared_.stop) {
      Clock::time_point now = Clock::now(), wake = now + std::chrono::milliseconds(50);
      for (const Fake& f : fakes)
        if (f.registered) wake = std::min(wake, f.next_heartbeat);
      const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count();
      const int n = ::epoll_wait(ep, ready.data(), int(ready.size()), int(std::max<long>(wait, 0)));
      for (int i = 0; i < n; ++i) drain(fakes[ready[std::size_t(i)].data.u64]);
      now = Clock::now();
      for (Fake& f : fakes) {
        if (f.registered && now >= f.next_heartbeat) {
          heartbeat(f, now);
          drain(f);
        }
        if (!f.registered && now - f.register_sent > std::chrono::seconds(2)) {
          send_register(f, now);  // as a real node retries its registration
          drain(f);
        }
      }
    }
    ::close(ep);
  }

 private:
  void send_register(Fake& f, Clock::time_point now) {
    json reg = json::parse(f.register_text);
    reg["sent_us"] = now_us();
    (void)send_message(f, Op::kRegister, reg.dump());
    f.register_sent = now;
  }

  bool in_window(Clock::time_point t) const {
    const std::int64_t start = shared_.window_start, end = shared_.window_end;
    const std::int64_t tick = t.time_since_epoch().count();
    return start != 0 && tick >= start && (end == 0 || tick < end);
  }

  void heartbeat(Fake& f, Clock::time_point now) {
    if (send_message(f, Op::kHeartbeat, "")) {
      f.in_flight.push_back(now);
      if (f.worker && in_window(now)) ++result.sent;
    } else if (f.worker && in_window(now)) {
      ++result.dropped;  // no room on the link: a real node drops it too
    }
    // The next at the real interval; one that fell far behind starts again from now rather
    // than sending a burst.
    f.next_heartbeat += interval_;
    if (f.next_heartbeat < now) f.next_heartbeat = now + interval_;
  }

  void drain(Fake& f) {
    zmq::message_t header;
    while (f.socket.recv(header, zmq::recv_flags::dontwait)) {
      std::string text;
      for (bool more = header.more(); more;) {
        zmq::message_t part;
        if (!f.socket.recv(part, zmq::recv_flags::none)) break;
        text.append(part.data<char>(), part.size());
        more = part.more();
      }
      if (header.size() != kHeaderBytes) return shared_.fail(f.name + ": a frame not a header");
      handle(f, decode_header(header.data<std::uint8_t>()).op, text);
    }
  }

  void handle(Fake& f, Op op, const std::string& text) {
    const Clock::time_point now = Clock::now();
    switch (op) {
      case Op::kHeartbeat:
        if (f.in_flight.empty()) return;
        if (f.worker && in_window(f.in_flight.front())) {
          result.latency_ms.push_back(secs(now - f.in_flight.front()) * 1e3);
          ++result.answered;
        }
        f.in_flight.pop_front();
        return;
      case Op::kControl: {
        const json j = json::parse(text, nullptr, false);
        if (f.registered || !j.is_object() || j.value("event", "") != "registered") return;
        f.registered = true;
        f.id = j.value("id", -1);
        // Real nodes are not in step: the first heartbeat at a random point of the interval.
        f.next_heartbeat =
            now + dur(std::uniform_real_distribution<double>(0, secs(interval_))(rng_));
        ++shared_.registered;
        return;
      }
      case Op::kClusterMap:
        if (!f.mapped) ++shared_.mapped;
        f.mapped = true;
        return;
      case Op::kError:
        return shared_.fail(f.name + ": the coordinator answered " + text);
      case Op::kShutdown:
        return shared_.fail(f.name + ": the coordinator shut the cluster down");
      default:
        return;
    }
  }

  Shared& shared_;
  Clock::duration interval_;
  std::mt19937 rng_;
};

// 1,000 fake workers hold 1,000 sockets here and 1,000 connections in the coordinator, which
// inherits this limit: the soft limit is raised to the hard one, and too low a hard one is said.
void raise_open_files(int workers) {
  const rlim_t need = rlim_t(workers) * 3 + 256;
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  if (lim.rlim_cur >= need) return;
  if (lim.rlim_max != RLIM_INFINITY && lim.rlim_max < need)
    throw Error("bench coordinator: --workers " + std::to_string(workers) + " needs about " +
                std::to_string(need) + " open files, the hard limit (ulimit -Hn) is " +
                std::to_string(lim.rlim_max) + ": raise it or give fewer --workers");
  spdlog::info("raising the open-file limit from {} to {}", lim.rlim_cur, lim.rlim_max);
  lim.rlim_cur = lim.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &lim) != 0)
    throw Error("bench coordinator: cannot raise the open-file limit to " +
                std::to_string(lim.rlim_max));
}

std::vector<FakeThread> make_fakes(const BenchCoordinatorOptions& opt, Shared& shared,
                                   zmq::context_t& ctx, const std::string& endpoint) {
  std::vector<FakeThread> threads;
  std::random_device rd;
  for (int t = 0; t < opt.threads; ++t) threads.emplace_back(shared, opt.heartbeat_s, rd());
  // Node 0 is the one server the coordinator waits for; it heartbeats, and is not measured.
  for (int k = -1; k < opt.workers; ++k) {
    Fake f;
    f.worker = k >= 0;
    f.name = f.worker ? "worker-" + std::to_string(k) : "server-0";
    char tag[16];
    std::snprintf(tag, sizeof tag, "#%08x", unsigned(rd()));
    json reg = {{"role", f.worker ? "worker" : "server"},
                {"name", f.name},
                {"address", f.worker ? "" : "tcp://127.0.0.1:9"},
                {"clock_domain", clock_domain()}};
    // As a real worker: the identity of its connections to the shards, 16 bytes or more.
    if (f.worker) reg["link_id"] = "bench-" + f.name + tag;
    f.register_text = reg.dump();
    f.socket = zmq::socket_t(ctx, zmq::socket_type::dealer);
    f.socket.set(zmq::sockopt::linger, 0);
    f.socket.set(zmq::sockopt::routing_id, f.name + tag);
    f.socket.connect(endpoint);
    threads[std::size_t(k + 1) % threads.size()].fakes.push_back(std::move(f));
  }
  return threads;
}

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const std::size_t i = std::min(sorted.size() - 1, std::size_t(p * double(sorted.size())));
  return sorted[i];
}

// Waits until `done` or a failure; false (with shared.error set) on a failure or the deadline.
template <class Done>
bool wait_for(Shared& shared, ChildCoordinator& coordinator, Clock::time_point deadline,
              const std::string& what, Done done) {
  while (!done()) {
    if (shared.stop) return false;
    if (!coordinator.alive()) {
      shared.fail("the coordinator exited " + what + ": " + coordinator.log_tail());
      return false;
    }
    if (Clock::now() > deadline) {
      shared.fail("timed out " + what);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

void print_table(const json& r) {
  const json &lat = r["latency_ms"], &hb = r["heartbeats"], &c = r["coordinator"];
  std::printf("\ncoordinator under %d fake workers (%d threads, heartbeat every %g s, %g s)\n",
              r["workers"].get<int>(), r["threads"].get<int>(), r["heartbeat_s"].get<double>(),
              r["seconds"].get<double>());
  std::printf("  registration   %8.3f s (all registered), %.3f s (all have the cluster map)\n",
              r["registration_s"].get<double>(), r["map_s"].get<double>());
  std::printf("  heartbeats     %8llu sent, %llu answered, %llu unanswered, %llu dropped\n",
              hb["sent"].get<unsigned long long>(), hb["answered"].get<unsigned long long>(),
              hb["unanswered"].get<unsigned long long>(), hb["dropped"].get<unsigned long long>());
  std::printf("  round trip ms  p50 %.3f  p90 %.3f  p99 %.3f  p99.9 %.3f  max %.3f\n",
              lat["p50"].get<double>(), lat["p90"].get<double>(), lat["p99"].get<double>(),
              lat["p999"].get<double>(), lat["max"].get<double>());
  std::printf(
      "  coordinator    RSS %ld KiB at start, %ld KiB registered, %ld KiB at the end, "
      "peak %ld KiB; %.1f KiB per worker\n",
      c["rss_start_kib"].get<long>(), c["rss_registered_kib"].get<long>(),
      c["rss_end_kib"].get<long>(), c["hwm_kib"].get<long>(), c["per_worker_kib"].get<double>());
  std::printf("  coordinator    CPU %.3f s over the window, %.1f us per heartbeat\n",
              c["cpu_s"].get<double>(), c["cpu_us_per_heartbeat"].get<double>());
  std::printf(
      "(round trip = a heartbeat sent to the coordinator's answer, which it sends to "
      "every heartbeat)\n");
}

json measure(const BenchCoordinatorOptions& opt, ChildCoordinator& coordinator) {
  zmq::context_t ctx(1);
  ctx.set(zmq::ctxopt::max_sockets, opt.workers + 64);
  Shared shared;
  std::vector<FakeThread> fakes = make_fakes(opt, shared, ctx, coordinator.endpoint());
  const pid_t pid = coordinator.pid();
  const long rss_start = status_kib(pid, "VmRSS");
  const int nodes = opt.workers + 1;
  const Clock::time_point t0 = Clock::now();
  std::vector<std::thread> threads;
  for (FakeThread& f : fakes) threads.emplace_back([&f] { f.run(); });
  json r = {{"workers", opt.workers},
            {"threads", opt.threads},
            {"seconds", opt.seconds},
            {"heartbeat_s", opt.heartbeat_s}};
  const auto deadline = t0 + std::chrono::seconds(120);
  bool ok = wait_for(shared, coordinator, deadline, "while the nodes registered",
                     [&] { return shared.registered == nodes; });
  r["registration_s"] = secs(Clock::now() - t0);
  ok = ok && wait_for(shared, coordinator, deadline, "waiting for the cluster map",
                      [&] { return shared.mapped == nodes; });
  r["map_s"] = secs(Clock::now() - t0);
  // The map's burst settles for one heartbeat interval before the window opens.
  std::this_thread::sleep_for(dur(opt.heartbeat_s));
  const long rss_registered = status_kib(pid, "VmRSS");
  const double cpu0 = cpu_seconds(pid);
  const Clock::time_point start = Clock::now();
  shared.window_start = start.time_since_epoch().count();
  const Clock::time_point end = start + dur(opt.seconds);
  ok = ok && wait_for(shared, coordinator, end + std::chrono::seconds(1), "while heartbeating",
                      [&] { return Clock::now() >= end; });
  shared.window_end = Clock::now().time_since_epoch().count();
  const double cpu_s = cpu_seconds(pid) - cpu0;
  // The answers to the window's last heartbeats.
  if (ok) std::this_thread::sleep_for(std::chrono::seconds(1));
  const long rss_end = status_kib(pid, "VmRSS"), hwm = status_kib(pid, "VmHWM");
  shared.stop = true;
  for (auto& t : threads) t.join();
  if (!shared.error.empty()) throw Error("bench coordinator: " + shared.error);
  std::vector<double> lat;
  std::uint64_t sent = 0, answered = 0, dropped = 0;
  for (const FakeThread& f : fakes) {
    lat.insert(lat.end(), f.result.latency_ms.begin(), f.result.latency_ms.end());
    sent += f.result.sent, answered += f.result.answered, dropped += f.result.dropped;
  }
  std::sort(lat.begin(), lat.end());
  double mean = 0;
  for (double x : lat) mean += x / double(lat.size());
  r["heartbeats"] = {{"sent", sent},
                     {"answered", answered},
                     {"unanswered", sent - answered},
                     {"dropped", dropped}};
  r["latency_ms"] = {{"p50", percentile(lat, 0.5)},         {"p90", percentile(lat, 0.9)},
                     {"p99", percentile(lat, 0.99)},        {"p999", percentile(lat, 0.999)},
                     {"max", lat.empty() ? 0 : lat.back()}, {"mean", mean}};
  r["coordinator"] = {{"rss_start_kib", rss_start},
                      {"rss_registered_kib", rss_registered},
                      {"rss_end_kib", rss_end},
                      {"hwm_kib", hwm},
                      {"per_worker_kib", double(rss_end - rss_start) / opt.workers},
                      {"cpu_s", cpu_s},
                      {"cpu_us_per_heartbeat", answered ? cpu_s * 1e6 / double(answered) : 0.0}};
  return r;
}

}  // namespace

int run_bench_coordinator(const BenchCoordinatorOptions& opt) {
  if (opt.workers < 1 || opt.workers > kMaxBenchWorkers)
    throw Error("bench coordinator: --workers " + std::to_string(opt.workers) + ", expected 1 to " +
                std::to_string(kMaxBenchWorkers));
  if (opt.threads < 1 || opt.threads > opt.workers)
    throw Error("bench coordinator: --threads " + std::to_string(opt.threads) +
                ", expected 1 to --workers (" + std::to_string(opt.workers) + ")");
  ensure_writable_file(opt.json_out, "--json");
  raise_open_files(opt.workers);
  char tmpl[] = "/tmp/psbed-bench-coordinator.XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw Error("bench coordinator: cannot make a folder in /tmp");
  const std::string dir = tmpl;
  json r;
  try {
    ChildCoordinator coordinator(opt, dir);
    spdlog::info("coordinator (pid {}) on {}; {} fake workers from {} threads", coordinator.pid(),
                 coordinator.endpoint(), opt.workers, opt.threads);
    r = measure(opt, coordinator);
  } catch (...) {
    std::filesystem::remove_all(dir);
    throw;
  }
  std::filesystem::remove_all(dir);
  print_table(r);
  if (!opt.json_out.empty()) {
    write_text_file(opt.json_out, r.dump(2) + "\n");
    spdlog::info("results written to {}", opt.json_out);
  }
  return 0;
}

}  // namespace psbed::ps
