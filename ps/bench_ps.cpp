#include "ps/bench_ps.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <functional>
#include <mutex>
#include <new>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/stats.hpp"
#include "core/units.hpp"
#include "ps/bench_raw.hpp"
#include "ps/client.hpp"
#include "ps/copy_counter.hpp"
#include "ps/shard.hpp"

namespace psbed::ps {
namespace {

using Clock = std::chrono::steady_clock;

// A model of `mib` MiB: one fully-connected layer whose weight is mib x 256K floats.
ClusterMap synthetic_map(int mib, int workers, int servers, std::int64_t partition) {
  const int in = mib * 256;
  std::string toml = "name = \"bench-" + std::to_string(mib) + "mib\"\ninput = [1, 1, " +
                     std::to_string(in) +
                     "]\nclasses = 1024\n[[layer]]\ntype = \"fc\"\nout = 1024\n";
  ClusterMap m;
  m.exp.model_name = "bench-" + std::to_string(mib) + "mib";
  m.exp.model_toml = toml;
  m.exp.sgd = {0.001f, 0.9f, 0.0f};
  m.exp.steps = 1 << 30;
  m.spec = parse_model_spec(toml, m.exp.model_name);
  m.plan = make_partition(m.spec, partition, servers);
  for (int s = 0; s < servers; ++s)
    m.servers.push_back({"server", s, "server-" + std::to_string(s), "", "", ""});
  for (int w = 0; w < workers; ++w)
    m.workers.push_back({"worker", w, "worker-" + std::to_string(w), "", "", ""});
  return m;
}

class Waiter {
 public:
  void add(int n) {
    std::lock_guard<std::mutex> l(mu_);
    left_ += n;
  }
  void done() {
    std::lock_guard<std::mutex> l(mu_);
    if (--left_ == 0) cv_.notify_all();
  }
  // Until every add()ed callback is done, or `failed` is set (another worker failed: what it
  // left undone, a shard out of memory say, may never answer), then throws.
  void wait(const std::atomic<bool>& failed) {
    std::unique_lock<std::mutex> l(mu_);
    while (left_ > 0) {
      if (failed) throw Error("stopped while waiting for the shards (another worker failed)");
      cv_.wait_for(l, std::chrono::milliseconds(100));
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int left_ = 0;
};

// A training step's traffic: push the whole gradient, then pull the whole model; or both at
// once, part by part (push-pull).
void bench_round(PsClient& client, const ClusterMap& map, std::vector<std::vector<float>>& params,
                 const std::vector<std::vector<float>>& grads, std::uint64_t clock, bool push_pull,
                 const std::atomic<bool>& failed) {
  const auto& parts = map.plan.parts;
  Waiter pushes, pulls;
  try {
    pushes.add(int(parts.size()));
    for (int i = 0; i < int(parts.size()); ++i) {
      const Part& p = parts[std::size_t(i)];
      const float* g = grads[std::size_t(p.key)].data() + p.offset;
      if (push_pull)
        client.push_pull(i, g, params[std::size_t(p.key)].data() + p.offset, 0, p.numel, clock, 0,
                         nullptr, [&] { pushes.done(); });
      else
        client.push(i, g, 0, p.numel, clock, 0, [&] { pushes.done(); });
    }
    pushes.wait(failed);
    if (push_pull) return;
    pulls.add(int(parts.size()));
    for (int i = 0; i < int(parts.size()); ++i) {
      const Part& p = parts[std::size_t(i)];
      client.pull(i, params[std::size_t(p.key)].data() + p.offset, 0, p.numel, clock, 0,
                  [&] { pulls.done(); });
    }
    pulls.wait(failed);
  } catch (...) {
    // A push or pull that throws (out of memory) leaves others in flight: the client stops, and
    // no callback runs, before the waiters they count down go.
    client.stop();
    throw;
  }
}

struct Result {
  double gb_per_s = 0;
  double seconds = 0;
  std::uint64_t bytes = 0;
  double copies_per_byte = 0;  // payload bytes copied in memory / payload bytes moved
};

// Every worker repeatedly pushes its whole gradient, then pulls the whole model; with `curve`
// over CURVE links (a key pair for the shards, one for the workers, which they list).
// --replicas 2: shard `s` forwards its updates to the next one, as `psbed server` does.
void connect_backup(Shard& shard, const ClusterMap& map, int s) {
  ZmqOptions z;
  z.role = ZmqOptions::Role::kClient;
  z.endpoint = map.servers[std::size_t(map.backup_of(s))].address;
  z.identity = map.servers[std::size_t(s)].link_id;
  z.thread_name = "bench-backup";
  shard.connect_backup([z](const std::string&) {
    auto backup = std::make_shared<ZmqTransport>(z);
    ZmqTransport* raw = backup.get();
    return BackupLink{backup, [raw] { raw->release_senders(); }};
  });
}

// What a run varies besides the sizes: CURVE links; `replicas` 2, each shard forwarding its
// updates to the next (ps/shard.hpp) as `psbed server` does under --replicas 2; and push-pull,
// each part pushed and its new values taken back in the push's answer (PsClient::push_pull).
struct Variant {
  bool curve = false;
  int replicas = 1;
  bool push_pull = false;
  int connections = 1;  // per worker and shard, a shard's I/O threads as many (--connections)
};

Result measure(int mib, int workers, int servers, std::int64_t partition, double min_seconds,
               const Variant& variant = {}) {
  const bool curve = variant.curve;
  ClusterMap map = synthetic_map(mib, workers, servers, partition);
  map.exp.replicas = variant.replicas;
  map.exp.connections = variant.connections;
  CurveKeys shard_keys, worker_keys;
  if (curve) {
    shard_keys.own = make_key_pair();
    worker_keys.own = make_key_pair();
    shard_keys.authorized =
        std::make_shared<const std::set<std::string>>(std::set{worker_keys.own.public_key});
    shard_keys.name = "bench-shard", worker_keys.name = "bench-worker";
  }
  std::vector<std::unique_ptr<ZmqTransport>> transports;
  std::vector<std::unique_ptr<TraceRecorder>> traces;
  std::vector<std::unique_ptr<Shard>> shards;
  for (int s = 0; s < servers; ++s) {
    ZmqOptions z;
    z.role = ZmqOptions::Role::kServer;
    z.endpoint = "tcp://127.0.0.1:*";
    z.thread_name = "bench-router";
    z.io_threads = variant.connections;
    z.curve = shard_keys;
    transports.push_back(std::make_unique<ZmqTransport>(z));
    traces.push_back(std::make_unique<TraceRecorder>("server-" + std::to_string(s), false));
    shards.push_back(std::make_unique<Shard>(1ull << 30, *transports.back(), *traces.back()));
    Shard* shard = shards.back().get();
    transports.back()->start([shard](Message&& m) { shard->enqueue(std::move(m)); });
    map.servers[s].address = transports.back()->endpoint();
    map.servers[s].curve_key = shard_keys.own.public_key;
    map.servers[s].link_id = "bench-server-" + std::to_string(s) + "#replica-link";
  }
  for (int s = 0; s < servers; ++s) {
    if (variant.replicas > 1 && servers > 1) connect_backup(*shards[s], map, s);
    shards[s]->start(map, s);
    // As psbed server does once it knows its size: a whole model's pull replies in flight to one
    // worker must not pass the per-peer bound (64 MiB by default), or they are dropped.
    transports[s]->set_peer_bounds(
        1 << 16, std::max<std::size_t>(64ull << 20, 4 * shards[s]->bytes_owned() + (16 << 20)));
  }

  std::atomic<std::uint64_t> bytes{0};
  std::atomic<bool> stop{false};
  std::atomic<bool> failed{false};  // a worker failed: the others stop waiting for the shards
  std::vector<std::thread> threads;
  const std::uint64_t model_bytes = std::uint64_t(map.spec.parameter_bytes());
  auto start = Clock::now();
  std::uint64_t copied_at_start = payload_bytes_copied().load();
  std::atomic<int> warm{0};
  std::mutex start_mu;
  std::condition_variable start_cv;
  std::mutex error_mu;
  std::string error;  // the first worker's failure, rethrown once every thread has stopped
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      bool counted = false;  // in `warm`, so the others do not wait for it
      auto work = [&] {
        // The buffers outlive the client, whose receiving threads write pulls into them.
        std::vector<std::vector<float>> params, grads;
        for (const auto& t : map.spec.tensors)
          params.emplace_back(t.numel), grads.emplace_back(t.numel, 1e-6f);
        PsClient client(map, w, "worker-" + std::to_string(w), nullptr, worker_keys);
        auto round = [&](std::uint64_t clock) {
          bench_round(client, map, params, grads, clock, variant.push_pull, failed);
        };
        std::uint64_t clock = 0;
        for (int i = 0; i < 2; ++i) round(clock++);  // warm-up: connections, first-touch faults
        {
          std::unique_lock<std::mutex> l(start_mu);
          counted = true;
          if (++warm == workers) {
            start = Clock::now();
            copied_at_start = payload_bytes_copied().load();
            start_cv.notify_all();
          } else {
            start_cv.wait(l, [&] { return warm == workers; });
          }
        }
        while (!stop) {
          round(clock++);
          bytes += 2 * model_bytes;
        }
        client.stop();
      };
      try {
        work();
      } catch (const std::exception& e) {
        // Out of memory, say: the run stops and says why, rather than std::terminate here.
        {
          std::lock_guard<std::mutex> l(error_mu);
          if (error.empty())
            error = "worker-" + std::to_string(w) + ": " +
                    (dynamic_cast<const std::bad_alloc*>(&e) ? std::string("out of memory")
                                                             : std::string(e.what()));
        }
        failed = true;
        stop = true;
        std::lock_guard<std::mutex> l(start_mu);
        if (!counted && ++warm == workers) start = Clock::now();
        start_cv.notify_all();
      }
    });
  }
  {
    std::unique_lock<std::mutex> l(start_mu);
    start_cv.wait(l, [&] { return warm == workers; });
  }
  if (!stop) std::this_thread::sleep_for(std::chrono::duration<double>(min_seconds));
  stop = true;
  for (auto& t : threads) t.join();
  if (!error.empty()) {
    for (auto& s : shards) s->stop();
    for (auto& t : transports) t->stop();
    throw Error("bench ps: " + std::to_string(mib) + " MiB model, " + std::to_string(workers) +
                " worker(s) x " + std::to_string(servers) + " server(s): " + error);
  }
  Result r;
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.bytes = bytes;
  r.gb_per_s = double(r.bytes) / r.seconds / 1e9;
  // The last rounds, cut short by the stop, copied a little more than `bytes` counts.
  if (r.bytes > 0)
    r.copies_per_byte = double(payload_bytes_copied().load() - copied_at_start) / double(r.bytes);
  for (auto& s : shards) s->stop();
  for (auto& t : transports) t->stop();
  return r;
}

double raw(int mib, double min_seconds) {
  RawBenchOptions o;
  o.bytes = std::uint64_t(mib) << 20;
  o.min_seconds = min_seconds;
  return bench_raw_round_trip(o).gb_per_s;
}

std::string ratios_text(const std::vector<double>& ratios) {
  std::string s;
  char text[32];
  for (double x : ratios) {
    std::snprintf(text, sizeof text, "%.2f", x);
    s += (s.empty() ? "" : " ") + std::string(text);
  }
  return s;
}

// Runs a, b, a, b, ..., a (`repeat` b runs): each b run is compared with the mean of the a runs
// on either side, so a drift of the machine's speed favours neither; rows report medians.
struct Alternation {
  std::vector<double> a, b, ratios;
};
Alternation alternate(int repeat, const std::function<double()>& a,
                      const std::function<double()>& b) {
  Alternation r;
  r.a.push_back(a());
  for (int i = 0; i < repeat; ++i) {
    r.b.push_back(b());
    r.a.push_back(a());
    r.ratios.push_back(r.b.back() / ((r.a[std::size_t(i)] + r.a[std::size_t(i) + 1]) / 2));
  }
  return r;
}

// The cost of CURVE: plain, CURVE, plain, ..., plain per model size (as the raw rows).
void curve_table(const BenchPsOptions& opt, std::int64_t partition, nlohmann::json& rows) {
  require_curve();
  std::printf(
      "\nsingle worker, single shard: push + pull of the whole model, plain and CURVE (parts of "
      "%s)\n%8s %12s %12s %8s\n",
      opt.partition.c_str(), "model", "plain GB/s", "CURVE GB/s", "ratio");
  for (int mib : opt.model_mib) {
    spdlog::info("{} MiB: {} CURVE runs between {} plain runs ...", mib, opt.repeat,
                 opt.repeat + 1);
    Variant secure;
    secure.curve = true;
    const Alternation runs = alternate(
        opt.repeat, [&] { return measure(mib, 1, 1, partition, opt.min_seconds).gb_per_s; },
        [&] { return measure(mib, 1, 1, partition, opt.min_seconds, secure).gb_per_s; });
    const std::vector<double>&plain = runs.a, &curve = runs.b, &ratios = runs.ratios;
    const double p = median(plain), c = median(curve), ratio = median(ratios);
    std::printf("%5d MiB %12.2f %12.2f %7.2fx   (ratios %s)\n", mib, p, c, ratio,
                ratios_text(ratios).c_str());
    std::fflush(stdout);
    rows.push_back({{"kind", "curve"},
                    {"model_mib", mib},
                    {"plain_gb_per_s", p},
                    {"curve_gb_per_s", c},
                    {"ratio", ratio},
                    {"plain_runs", plain},
                    {"curve_runs", curve},
                    {"ratios", ratios}});
  }
  std::printf("(GB/s = pushed + pulled bytes / s; ratio = CURVE / plain)\n");
}

// The cost of --replicas 2: 1 copy, 2 copies, 1 copy, ... for each worker count on the
// aggregate model and 2 shards; each 2-copy run is compared with the mean of the 1-copy runs on
// either side, and the row reports medians.
void replicas_table(const BenchPsOptions& opt, std::int64_t partition, nlohmann::json& rows) {
  const int servers = 2;
  std::printf(
      "\nreplicated shards: push + pull of a %d MiB model, %d shards, async (parts of %s)\n"
      "%8s %14s %14s %8s\n",
      opt.aggregate_mib, servers, opt.partition.c_str(), "workers", "1 copy GB/s", "2 copies GB/s",
      "ratio");
  for (int w : opt.workers) {
    spdlog::info("{} worker(s): {} runs with 2 copies between {} with 1 ...", w, opt.repeat,
                 opt.repeat + 1);
    auto run = [&](int replicas) {
      Variant v;
      v.replicas = replicas;
      return measure(opt.aggregate_mib, w, servers, partition, opt.min_seconds, v).gb_per_s;
    };
    const Alternation runs = alternate(
        opt.repeat, [&] { return run(1); }, [&] { return run(2); });
    const std::vector<double>&one = runs.a, &two = runs.b, &ratios = runs.ratios;
    const double a = median(one), b = median(two), ratio = median(ratios);
    std::printf("%8d %14.2f %14.2f %7.2fx   (ratios %s)\n", w, a, b, ratio,
                ratios_text(ratios).c_str());
    std::fflush(stdout);
    rows.push_back({{"kind", "replicas"},
                    {"model_mib", opt.aggregate_mib},
                    {"workers", w},
                    {"servers", servers},
                    {"one_copy_gb_per_s", a},
                    {"two_copies_gb_per_s", b},
                    {"ratio", ratio},
                    {"one_copy_runs", one},
                    {"two_copies_runs", two},
                    {"ratios", ratios}});
  }
  std::printf("(GB/s = pushed + pulled bytes / s; ratio = 2 copies / 1 copy)\n");
}

// Striping: 1 connection, N, 1, ... per model size, single worker and shard; push-pull rounds
// with --push-pull.
void connections_table(const BenchPsOptions& opt, std::int64_t partition, nlohmann::json& rows) {
  const int n = opt.connections;
  std::printf(
      "\nsingle worker, single shard: %s of the whole model over 1 and %d connections (parts "
      "of %s)\n%8s %12s %12s %8s\n",
      opt.push_pull ? "push-pull" : "push + pull", n, opt.partition.c_str(), "model", "1 conn GB/s",
      (std::to_string(n) + " conn GB/s").c_str(), "ratio");
  for (int mib : opt.model_mib) {
    spdlog::info("{} MiB: {} runs over {} connections between {} over 1 ...", mib, opt.repeat, n,
                 opt.repeat + 1);
    auto run = [&](int connections) {
      Variant v;
      v.push_pull = opt.push_pull;
      v.connections = connections;
      return measure(mib, 1, 1, partition, opt.min_seconds, v).gb_per_s;
    };
    const Alternation runs = alternate(
        opt.repeat, [&] { return run(1); }, [&] { return run(n); });
    const double a = median(runs.a), b = median(runs.b), ratio = median(runs.ratios);
    std::printf("%5d MiB %12.2f %12.2f %7.2fx   (ratios %s)\n", mib, a, b, ratio,
                ratios_text(runs.ratios).c_str());
    std::fflush(stdout);
    rows.push_back({{"kind", "connections"},
                    {"model_mib", mib},
                    {"connections", n},
                    {"push_pull", opt.push_pull},
                    {"one_gb_per_s", a},
                    {"striped_gb_per_s", b},
                    {"ratio", ratio},
                    {"one_runs", runs.a},
                    {"striped_runs", runs.b},
                    {"ratios", runs.ratios}});
  }
  std::printf("(GB/s = pushed + pulled bytes / s; ratio = %d connections / 1)\n", n);
}

}  // namespace

constexpr std::int64_t kMaxBenchParts = 100000;

int run_bench_ps(const BenchPsOptions& opt) {
  // Everything checked before the first row, so a bad value does not cost a table of runs.
  auto at_least_one = [](const char* flag, const std::vector<int>& values) {
    if (values.empty())
      throw Error(std::string("bench ps: ") + flag + ": expected at least one value");
    for (int v : values)
      if (v < 1)
        throw Error(std::string("bench ps: ") + flag + " " + std::to_string(v) +
                    ": expected 1 or more");
  };
  at_least_one("--models", opt.model_mib);
  at_least_one("--aggregate-model", {opt.aggregate_mib});
  at_least_one("--workers", opt.workers);
  at_least_one("--servers", opt.servers);
  at_least_one("--repeat", {opt.repeat});
  if (!(opt.min_seconds > 0) || !std::isfinite(opt.min_seconds))
    throw Error("bench ps: --min-seconds: expected a number of seconds above 0");
  const std::int64_t partition =
      std::int64_t(for_flag("--partition-bytes", [&] { return parse_bytes(opt.partition); }));
  if (partition < 4)
    throw Error("bench ps: --partition-bytes " + opt.partition + ": expected 4 bytes or more");
  // A message per part and step: a model cut into a million parts takes minutes a round trip.
  int largest = opt.aggregate_mib;
  for (int mib : opt.model_mib) largest = std::max(largest, mib);
  if (const std::int64_t parts = std::int64_t(largest) * (1 << 20) / partition;
      parts > kMaxBenchParts)
    throw Error("bench ps: --partition-bytes " + opt.partition + " cuts the " +
                std::to_string(largest) + " MiB model into about " + std::to_string(parts) +
                " parts, expected at most " + std::to_string(kMaxBenchParts) +
                " (give a larger size)");
  // Each worker holds the model and its gradient, the shards the model and what they apply: far
  // past the memory there is, the run would be killed halfway through its table.
  const std::uint64_t mib_bytes = std::uint64_t(1) << 20;
  std::uint64_t need = 4 * std::uint64_t(largest) * mib_bytes;
  for (int w : opt.workers)
    need =
        std::max(need, (2 * std::uint64_t(w) + 2) * std::uint64_t(opt.aggregate_mib) * mib_bytes);
  if (const std::uint64_t have = available_memory_bytes(); have > 0 && need > have)
    throw Error("bench ps: the largest run needs about " + format_memory(need) + " (" +
                std::to_string(largest) + " MiB models, up to " +
                std::to_string(*std::max_element(opt.workers.begin(), opt.workers.end())) +
                " workers), more than the " + format_memory(have) +
                " of memory available (expected smaller --models, --aggregate-model or --workers)");
  ensure_writable_file(opt.json_out, "--json");
  nlohmann::json rows = nlohmann::json::array();
  if (opt.push_pull && (opt.secure || opt.replicas > 1))
    throw Error(
        "bench ps: --push-pull times the main tables; --secure and --replicas 2 time "
        "theirs with a push then a pull: give one of them");
  if (opt.connections < 1 || opt.connections > kMaxConnections)
    throw Error("bench ps: --connections " + std::to_string(opt.connections) + ": expected 1 to " +
                std::to_string(kMaxConnections));
  if (opt.connections > 1 && (opt.secure || opt.replicas > 1))
    throw Error(
        "bench ps: --connections, --secure and --replicas 2 each time their own table: "
        "give one of them");
  if (opt.secure || opt.replicas > 1 || opt.connections > 1) {
    if (opt.secure)
      curve_table(opt, partition, rows);
    else if (opt.replicas > 1)
      replicas_table(opt, partition, rows);
    else
      connections_table(opt, partition, rows);
    if (!opt.json_out.empty())
      write_text_file(
          opt.json_out,
          nlohmann::json({{"partition", opt.partition}, {"rows", rows}}).dump(2) + "\n");
    return 0;
  }
  Variant variant;
  variant.push_pull = opt.push_pull;
  const char* traffic = opt.push_pull ? "push-pull" : "push + pull";
  std::printf("\nsingle worker, single shard: %s of the whole model (parts of %s)\n", traffic,
              opt.partition.c_str());
  std::printf("%8s %12s %12s %8s %8s\n", "model", "psbed GB/s", "raw GB/s", "ratio", "copies");
  for (int mib : opt.model_mib) {
    // raw, psbed, raw, psbed, ..., raw: each psbed run is compared with the mean of the raw
    // runs on either side of it, and the row reports medians, so a drift of the machine's
    // speed during the row favours neither side.
    spdlog::info("{} MiB: {} psbed runs between {} raw runs ...", mib, opt.repeat, opt.repeat + 1);
    std::vector<double> raws = {raw(mib, opt.min_seconds / 2)}, ps_runs, ratios, copies;
    for (int i = 0; i < opt.repeat; ++i) {
      const Result run = measure(mib, 1, 1, partition, opt.min_seconds, variant);
      ps_runs.push_back(run.gb_per_s);
      copies.push_back(run.copies_per_byte);
      raws.push_back(raw(mib, opt.min_seconds / 2));
      ratios.push_back(ps_runs.back() / ((raws[i] + raws[i + 1]) / 2));
    }
    const double p = median(ps_runs), r = median(raws), ratio = median(ratios);
    std::printf("%5d MiB %12.2f %12.2f %7.2fx %8.2f   (ratios %s)\n", mib, p, r, ratio,
                median(copies), ratios_text(ratios).c_str());
    std::fflush(stdout);
    rows.push_back({{"kind", "single"},
                    {"copies_per_payload_byte", median(copies)},
                    {"model_mib", mib},
                    {"workers", 1},
                    {"servers", 1},
                    {"psbed_gb_per_s", p},
                    {"raw_gb_per_s", r},
                    {"ratio", ratio},
                    {"psbed_runs", ps_runs},
                    {"raw_runs", raws},
                    {"ratios", ratios}});
  }
  std::printf("\naggregate %s, %d MiB model\n%8s %8s %12s\n", traffic, opt.aggregate_mib, "workers",
              "servers", "GB/s");
  for (int s : opt.servers)
    for (int w : opt.workers) {
      spdlog::info("{} worker(s) x {} server(s) ...", w, s);
      const Result p = measure(opt.aggregate_mib, w, s, partition, opt.min_seconds, variant);
      std::printf("%8d %8d %12.2f\n", w, s, p.gb_per_s);
      std::fflush(stdout);
      rows.push_back({{"kind", "aggregate"},
                      {"model_mib", opt.aggregate_mib},
                      {"workers", w},
                      {"servers", s},
                      {"psbed_gb_per_s", p.gb_per_s}});
    }
  std::printf(
      "(GB/s = pushed + pulled bytes / s; raw = cppzmq DEALER/ROUTER echo of the same bytes, "
      "zero-copy; copies = payload bytes copied in memory per payload byte moved%s)\n",
      opt.push_pull ? "; push-pull: each part pushed, its new values in the push's answer" : "");
  if (!opt.json_out.empty()) {
    write_text_file(
        opt.json_out,
        nlohmann::json({{"partition", opt.partition}, {"push_pull", opt.push_pull}, {"rows", rows}})
                .dump(2) +
            "\n");
    spdlog::info("results written to {}", opt.json_out);
  }
  return 0;
}

}  // namespace psbed::ps
