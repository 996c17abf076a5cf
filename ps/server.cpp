#include "ps/server.hpp"

#include <pthread.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <filesystem>
#include <mutex>
#include <thread>
#include <variant>

#include "core/error.hpp"
#include "core/files.hpp"
#include "core/trace.hpp"
#include "ps/client.hpp"
#include "ps/link.hpp"
#include "ps/node_link.hpp"
#include "ps/shard.hpp"
#include "ps/stop_signals.hpp"
#include "ps/store.hpp"
#include "ps/zmq_transport.hpp"

namespace psbed::ps {
namespace {

// An endpoint on every interface (tcp://0.0.0.0:P, tcp://*:P, tcp://[::]:P) is where to listen,
// not an address another host can reach.
bool wildcard_endpoint(const std::string& endpoint) {
  const std::string tcp = "tcp://";
  if (endpoint.compare(0, tcp.size(), tcp) != 0) return false;
  const std::string rest = endpoint.substr(tcp.size());
  const std::size_t colon = rest.rfind(':');
  const std::string host = colon == std::string::npos ? rest : rest.substr(0, colon);
  return host == "0.0.0.0" || host == "*" || host == "[::]" || host == "::" || host.empty();
}

// --replicas 2: a connection to the next shard, which keeps the copy of this one's parts,
// with this shard's link id as its identity, over this shard's link; opened again when that
// shard rejoins.
void connect_backup(Shard& shard, const ClusterMap& map, int id, const std::string& link_id,
                    const CurveKeys& keys, const std::shared_ptr<LinkBuckets>& buckets) {
  if (map.exp.replicas < 2 || map.servers.size() < 2) return;
  const NodeInfo backup = map.servers.at(std::size_t(map.backup_of(id)));
  shard.connect_backup([backup, link_id, keys, buckets](const std::string& address) {
    ZmqOptions z;
    z.role = ZmqOptions::Role::kClient;
    z.endpoint = address.empty() ? backup.address : address;
    z.identity = link_id;
    z.thread_name = "ps-backup";
    if (keys.on()) {
      z.curve = keys;
      z.curve.server_key = backup.curve_key;
    }
    auto zmq = std::make_unique<ZmqTransport>(z);
    ZmqTransport* raw = zmq.get();
    std::unique_ptr<Transport> t = std::move(zmq);
    if (buckets) t = std::make_unique<ShapedTransport>(std::move(t), buckets);
    return BackupLink{std::shared_ptr<Transport>(std::move(t)), [raw] { raw->release_senders(); }};
  });
}

// Messages refused so far, by kind ("forged sender", "non-finite gradient", ...).
nlohmann::json refused_by_kind(const Shard& shard, const Transport& transport) {
  nlohmann::json by_kind = nlohmann::json::object();
  for (int k = 1; k < kProblemKinds; ++k) {
    const auto p = static_cast<Problem>(k);
    if (auto n = shard.bad().count(p) + transport.bad_messages().count(p))
      by_kind[problem_name(p)] = n;
  }
  return by_kind;
}

// The shard's counters, for the coordinator's /metrics, /api/status and summary.
nlohmann::json shard_stats(const Shard& shard, const Transport& transport,
                           const ZmqTransport& zmq) {
  return {{"event", "stats"},
          {"pushes", shard.pushes()},
          {"pulls", shard.pulls()},
          {"bad_messages", shard.bad().total() + transport.bad_messages().total()},
          {"bad_by_kind", refused_by_kind(shard, transport)},
          {"queue_depth", shard.queue_depth()},
          {"checkpoints", shard.checkpoints_written()},
          {"last_checkpoint", shard.last_checkpoint()},
          {"forwarded", shard.forwarded()},
          {"replicated", shard.replicated()},
          {"replayed", shard.replayed()},
          {"promoted", shard.promoted()},
          {"dropped_unread", zmq.dropped_unread()}};
}

}  // namespace

int run_server(const ServerOptions& in) {
  ServerOptions opt = in;
  if (opt.node.name.empty()) opt.node.name = "server-" + std::to_string(::getpid());
  if (!opt.advertise.empty() && wildcard_endpoint(opt.advertise))
    throw Error("--advertise " + opt.advertise +
                " is no address workers can reach: give this host's name or IP");
  // The trace is written when the server stops: a folder it cannot write in is said now.
  ensure_writable_dir(opt.node.trace_dir, "--trace-dir");
  StopSignals signals;  // before any thread starts: they all leave SIGTERM and SIGINT to it
  ZmqOptions z;
  z.role = ZmqOptions::Role::kServer;
  z.endpoint = opt.bind;
  z.thread_name = "ps-router";
  z.limits.max_message_bytes = opt.max_message_bytes;
  z.curve = node_keys(opt.node.keys, opt.node.key_file, opt.node.name);
  const LinkOptions shaping = parse_link(opt.node.bandwidth, opt.node.latency);
  // Acks are tiny and a worker asks for each slice once a step: the bytes bound is what holds a
  // peer that never reads; it grows with this shard's parameters once they are known.
  z.peer_max_messages = 1 << 16;
  z.io_threads = opt.io_threads;
  auto zmq_owned = std::make_unique<ZmqTransport>(z);
  ZmqTransport& zmq_transport = *zmq_owned;
  std::unique_ptr<Transport> owned = std::move(zmq_owned);
  // One NIC: the forwards to a backup shard (--replicas 2) share it with the workers' traffic.
  const std::shared_ptr<LinkBuckets> buckets =
      shaping.shaped() ? LinkBuckets::make(shaping) : nullptr;
  if (buckets) owned = std::make_unique<ShapedTransport>(std::move(owned), buckets);
  Transport& transport = *owned;
  TraceRecorder trace(opt.node.name, !opt.node.trace_dir.empty());
  Shard shard(opt.max_message_bytes, transport, trace, opt.apply_threads);
  std::string address =
      opt.advertise.empty() ? transport.endpoint() : opt.advertise;  // bound already
  if (opt.advertise.empty() && wildcard_endpoint(address))
    throw Error(
        "--bind " + opt.bind + " listens on every interface, and workers cannot connect to " +
        address +
        ": give --advertise tcp://THIS_HOST:PORT, the address workers reach this server at");
  transport.start([&](Message&& m) { shard.enqueue(std::move(m)); });
  spdlog::info("{} serving on {} (link: {})", opt.node.name, transport.endpoint(), shaping.str());

  NodeLink link({opt.node.coordinator, "server", opt.node.name, address, opt.node.connect_timeout_s,
                 opt.node.heartbeat_s, opt.node.coordinator_timeout_s, z.curve});
  link.on_control([&](const nlohmann::json& j) {
    const std::string event = j.value("event", "");
    if (event == "worker_dead") shard.worker_dead(j.value("worker", -1));
    if (event == "server_dead") shard.server_dead(j.value("server", -1));
    if (event == "backup_back") shard.backup_back(j.value("server", -1), j.value("address", ""));
    const auto step = j.find("step");
    if (event == "checkpoint" && step != j.end() && step->is_number_unsigned())
      shard.checkpoint_at(step->get<std::uint64_t>());
  });
  // SIGTERM or SIGINT: this shard stops serving, says so to the coordinator (the run cannot go
  // on without its parameters) and writes its trace.
  const StopHook hook(signals, [&link](int sig) {  // removed before `link` goes
    link.stop("stopped by " + StopSignals::name(sig));
  });
  ClusterMap map;
  const std::string link_id = PsClient::make_link_id(opt.node.name);
  try {
    // With CURVE the workers need this shard's public key: it travels in the cluster map.
    // The link id is the identity of its connection to a backup shard (--replicas 2), which
    // takes forwards only from it.
    nlohmann::json about = {{"link_id", link_id}};
    if (z.curve.on()) about["curve_key"] = z.curve.own.public_key;
    map = link.join(about);
  } catch (const Error&) {
    transport.stop();  // first: it delivers to the shard, which goes before it
    if (link.stopped().empty()) throw;
    // The coordinator counts a registered server, and hears now rather than at the heartbeat
    // timeout that it is gone.
    spdlog::warn("{} {} {}", opt.node.name, link.stopped(), link.leave_before_start());
    return kStoppedStatus;
  }
  trace.set_metadata("role", "server");
  trace.set_metadata("clock_sync", link.clock_sync());
  trace.set_metadata("cluster", map.to_json()["experiment"]);
  shard.set_checkpoint_dir(opt.checkpoint_dir);
  try {
    connect_backup(shard, map, link.id(), link_id, z.curve, buckets);
    shard.start(map, link.id());
  } catch (const Error& e) {  // a checkpoint it cannot resume from: the run cannot go on
    link.leave(std::string("cannot start: ") + e.what(), 0.5);
    transport.stop();
    throw;
  }
  // Room for one worker asking for all of this shard's parameters a few times over (pulls of
  // several clocks in flight), above the default bound.
  zmq_transport.set_peer_bounds(
      1 << 16, std::max<std::size_t>(z.peer_max_bytes, 4 * shard.bytes_owned() + (16 << 20)));
  // Every second, the shard's counters go to the coordinator (its /metrics and /api/status);
  // four times a second, the process's CPU seconds go to the trace (the profile's host cost).
  nlohmann::json cpu_samples = nlohmann::json::array();
  bool said_synced = false;
  for (int tick = 0;; ++tick) {
    cpu_samples.push_back({now_us(), process_cpu_s()});
    if (link.wait_shutdown(0.25)) break;
    if (!said_synced && shard.synced()) {  // a shard that rejoined holds its copy now
      said_synced = true;
      link.send_control({{"event", "synced"}});
    }
    if (tick % 4 == 3) link.send_control(shard_stats(shard, transport, zmq_transport));
  }
  cpu_samples.push_back({now_us(), process_cpu_s()});
  const std::string stopped = link.stopped();
  if (!stopped.empty()) link.leave(stopped, 0.5);
  transport.stop();  // first: wakes a lane blocked in send() by a peer that stopped reading
  shard.stop();
  if (const std::string refused = zmq_transport.refused_connections(); !refused.empty())
    spdlog::warn("{} {}", opt.node.name, refused);
  const auto& bad = shard.bad();
  const auto& tbad = transport.bad_messages();
  if (stopped.empty())
    spdlog::info("{} shutting down: {} pushes, {} pulls, {} bad messages dropped", opt.node.name,
                 shard.pushes(), shard.pulls(), bad.total() + tbad.total());
  const nlohmann::json by_kind = refused_by_kind(shard, transport);
  for (const auto& [kind, n] : by_kind.items())
    spdlog::info("  bad messages, {}: {}", kind, n.get<std::uint64_t>());
  if (!opt.node.trace_dir.empty()) {
    trace.set_metadata("bad_messages", bad.total() + tbad.total());
    trace.set_metadata("cpu_samples", cpu_samples);
    trace.set_metadata("bad_messages_by_kind", by_kind);
    std::filesystem::create_directories(opt.node.trace_dir);
    trace.write(opt.node.trace_dir + "/" + opt.node.name + ".trace.json");
  }
  if (const std::string lost = link.coordinator_lost(); !lost.empty())
    throw Error(lost);  // traces kept
  if (!stopped.empty()) {
    spdlog::warn("{} {} after {} pushes, {} pulls{}", opt.node.name, stopped, shard.pushes(),
                 shard.pulls(),
                 opt.node.trace_dir.empty()
                     ? std::string()
                     : "; trace in " + opt.node.trace_dir + "/" + opt.node.name + ".trace.json");
    return kStoppedStatus;
  }
  return 0;
}

}  // namespace psbed::ps
