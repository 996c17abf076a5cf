#include "ps/zmq_transport.hpp"

#include <pthread.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <zmq.hpp>

#include "core/error.hpp"
#include "ps/transport_thread.hpp"
#include "ps/zmq_frames.hpp"

namespace psbed::ps {
namespace {

// A client's callers wait while this many messages wait for the owner thread to take them: with
// its own backlog (max_pending) that is where back-pressure reaches the caller. A server's owner
// takes every send (its peers are bounded one by one), at its own pace: its senders wait only
// past the larger bound.
constexpr std::size_t kClientMailboxDepth = 2, kServerMailboxDepth = 256;
constexpr int kReceiveBatch = 64;  // then look at the outgoing side, so neither starves the other
// Short: a peer that never reads keeps the owner thread retrying, and the others' messages that
// met a full queue at the same time wait for the next retry.
constexpr std::chrono::milliseconds kFirstRetry{1}, kLastRetry{4};

// A message on its way out, as frames ready for the network socket.
struct Outgoing {
  zmq::message_t header;
  zmq::message_t payload;
  bool has_payload = false;
  std::size_t bytes() const { return header.size() + payload.size(); }
};

// One peer's messages that ZeroMQ had no room for yet, in order.
struct Backlog {
  std::deque<Outgoing> queue;
  std::size_t bytes = 0;
  bool logged = false;  // that this peer's messages are being dropped
};

enum class SendResult { kSent, kBlocked, kUnreachable };

// Other threads' way to the owner thread. A queue under a mutex, and an eventfd in the owner's
// poll that a sender writes only while the owner sleeps there: a busy owner takes the messages
// without a system call on either side, where an inproc ZeroMQ socket signals through its own
// mailbox: several system calls a message, costly on a virtual machine.
struct Mailbox {
  std::mutex mu;
  std::condition_variable room;  // a client's senders wait here for room
  std::deque<std::pair<PeerId, Outgoing>> queue;
  bool sleeping = false;   // the owner polls and wants the eventfd written to wake
  bool signalled = false;  // written since it last woke
  bool closed = false;     // stopped: senders return false
  int efd = -1;
  Mailbox() : efd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    if (efd < 0) throw Error(std::string("eventfd: ") + std::strerror(errno));
  }
  ~Mailbox() { ::close(efd); }
  void wake() const {
    const std::uint64_t one = 1;
    (void)!::write(efd, &one, sizeof one);
  }
  void drain() const {
    std::uint64_t n;
    (void)!::read(efd, &n, sizeof n);
  }
};

}  // namespace

struct ZmqTransport::Impl {
  explicit Impl(ZmqOptions o);
  void run();  // the owner thread
  bool receive_one();
  bool take_from_outbox();
  void close_mailbox() {
    {
      std::lock_guard<std::mutex> lock(box.mu);
      box.closed = true;
    }
    box.room.notify_all();
  }
  void enqueue(PeerId peer, Outgoing out);
  bool gate_outbox() const { return !server && pending_count >= max_pending; }
  bool flush();
  SendResult send_now(const PeerId& peer, Outgoing& out);
  void drop_bad(const PeerId& peer, const Verdict& v);
  void fail(const std::string& name, const char* what);

  const ZmqOptions opt;
  const bool server;
  zmq::context_t ctx{std::max(1, opt.io_threads)};
  std::unique_ptr<ZapHandler> zap;  // CURVE servers only; ends before the context
  // Owned by the owner thread once started (the thread's creation is the hand-over point).
  zmq::socket_t net;
  Mailbox box;  // other threads' way in

  std::string endpoint;
  BadMessageCounter bad;
  ReceiveFn on_receive;
  std::thread owner;
  std::atomic<std::thread::id> owner_id{};
  std::mutex stop_mu;
  bool started = false, stopped = false;  // under stop_mu
  enum class State { kNew, kRunning, kStopped };
  std::atomic<State> state{State::kNew};  // for send(), which must not wait on stop_mu

  // Owner-thread state: messages ZeroMQ had no room for yet, in order, per peer.
  std::size_t max_pending;  // opt.max_pending, or PSBED_QUEUE_DEPTH
  std::map<PeerId, Backlog> pending;
  std::size_t pending_count = 0;
  std::atomic<std::size_t> peer_max_messages, peer_max_bytes;
  std::atomic<std::uint64_t> dropped{0};
  std::unordered_set<PeerId> unreachable_logged;
};

ZmqTransport::Impl::Impl(ZmqOptions o)
    : opt(std::move(o)),
      server(opt.role == ZmqOptions::Role::kServer),
      net(ctx, server ? zmq::socket_type::router : zmq::socket_type::dealer),
      max_pending(opt.max_pending),
      peer_max_messages(opt.peer_max_messages),
      peer_max_bytes(opt.peer_max_bytes) {
  // A test knob: tiny queues everywhere force back-pressure on every path (the stress tests).
  int send_hwm = opt.send_hwm, receive_hwm = opt.receive_hwm;
  if (const char* depth = std::getenv("PSBED_QUEUE_DEPTH")) {
    const int n = std::atoi(depth);
    if (n > 0) send_hwm = receive_hwm = n;
    if (n > 0) max_pending = std::size_t(n);
  }
  net.set(zmq::sockopt::sndhwm, send_hwm);
  net.set(zmq::sockopt::rcvhwm, receive_hwm);
  net.set(zmq::sockopt::linger, static_cast<int>(opt.linger.count()));
  net.set(zmq::sockopt::maxmsgsize, static_cast<std::int64_t>(std::max<std::uint64_t>(
                                        opt.limits.max_message_bytes, kHeaderBytes)));
  // Without this a ROUTER silently drops messages to a full or unknown peer; with it, send
  // reports EAGAIN (we keep the message and retry) or EHOSTUNREACH (we log and drop).
  if (server) net.set(zmq::sockopt::router_mandatory, true);
  if (!server && !opt.identity.empty()) net.set(zmq::sockopt::routing_id, opt.identity);
  if (opt.curve.on()) zap = secure_socket(ctx, net, opt.curve, server);  // before bind/connect
  // A port past 65535 is taken by ZeroMQ's connect, which then retries for ever.
  if (opt.endpoint.rfind("tcp://", 0) == 0) {
    const std::string port = opt.endpoint.substr(opt.endpoint.rfind(':') + 1);
    const bool digits = !port.empty() && port.size() <= 9 &&
                        port.find_first_not_of("0123456789") == std::string::npos;
    if (digits && (std::stol(port) > 65535 || (!server && std::stol(port) == 0)))
      throw Error(std::string("cannot ") + (server ? "bind " : "connect to ") + "'" + opt.endpoint +
                  "': port " + port + " is out of range, expected 1 to 65535" +
                  (server ? " (or * for any free port)" : ""));
  }
  try {
    if (server) {
      net.bind(opt.endpoint);
      endpoint = net.get(zmq::sockopt::last_endpoint);
    } else {
      net.connect(opt.endpoint);
      endpoint = opt.endpoint;
    }
  } catch (const zmq::error_t& e) {
    // The hint for what went wrong: an address in use or not this host's is well formed.
    const char* hint =
        e.num() == EADDRINUSE
            ? " (another process listens there: give another port, or * for any free one)"
        : e.num() == EADDRNOTAVAIL ? " (no network interface of this host has that address)"
                                   : " (expected an address like tcp://127.0.0.1:5555)";
    throw Error(std::string("cannot ") + (server ? "bind " : "connect to ") + "'" + opt.endpoint +
                "': " + e.what() + hint);
  }
}

void ZmqTransport::Impl::fail(const std::string& name, const char* what) {
  spdlog::error("{} transport on {} failed: {}", name, endpoint, what);
  ctx.shutdown();  // other sockets of the context (a CURVE gatekeeper's) end too
}

void ZmqTransport::Impl::run() {
  const std::string name =
      opt.thread_name.empty() ? (server ? "ps-server" : "ps-client") : opt.thread_name;
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
  owner_id = std::this_thread::get_id();
  const transport_thread::Scope marked;
  bool stalled = false;  // see below
  std::chrono::milliseconds retry = kFirstRetry;
  try {
    for (;;) {
      const bool backlog = pending_count > 0;
      const bool gated = gate_outbox();
      bool mail = false;
      if (!gated) {
        std::lock_guard<std::mutex> lock(box.mu);
        mail = !box.queue.empty();
        box.sleeping = !mail;  // mail waiting: look at the network without sleeping
      }
      zmq_pollitem_t items[] = {
          {net.handle(), 0,
           static_cast<short>(ZMQ_POLLIN | (backlog && !stalled ? ZMQ_POLLOUT : 0)), 0},
          {nullptr, box.efd, static_cast<short>(gated ? 0 : ZMQ_POLLIN), 0},
      };
      try {
        zmq::poll(items, 2,
                  mail                 ? std::chrono::milliseconds(0)
                  : backlog && stalled ? retry
                                       : std::chrono::milliseconds(-1));
      } catch (const zmq::error_t& e) {
        if (e.num() != EINTR) throw;  // a signal: look again
        for (auto& item : items) item.revents = 0;
      }
      if (!gated) {
        std::lock_guard<std::mutex> lock(box.mu);
        box.sleeping = box.signalled = false;
      }
      if (items[1].revents & ZMQ_POLLIN) box.drain();
      if (items[0].revents & ZMQ_POLLIN)
        for (int i = 0; i < kReceiveBatch && receive_one(); ++i) {
        }
      for (int i = 0; i < kReceiveBatch && !gate_outbox() && take_from_outbox(); ++i) {
      }
      if (pending_count == 0) continue;
      if (flush()) {
        stalled = false;
        retry = kFirstRetry;
      } else if (pending_count > 0 && (stalled || (items[0].revents & ZMQ_POLLOUT))) {
        // A ROUTER is writable when *any* peer has room, so POLLOUT can hold while every peer we
        // have messages for is full. Polling for it again would spin; retry on a short, growing
        // timer instead (any other wake-up retries too). A DEALER's POLLOUT is exact: never here.
        retry = stalled ? std::min(retry * 2, kLastRetry) : kFirstRetry;
        stalled = true;
      }
    }
  } catch (const zmq::error_t& e) {
    if (e.num() != ETERM) fail(name, e.what());
  } catch (const std::exception& e) {
    fail(name, e.what());
  }
  // Stopped or failed: senders waiting for room, and later ones, return false.
  close_mailbox();
  owner_id = std::thread::id();  // ids are reused: a later thread must not pass for this one
  pending.clear();               // drops the payload references held here
  net.close();
}

bool ZmqTransport::Impl::receive_one() {
  zmq::message_t first;
  if (!net.recv(first, zmq::recv_flags::dontwait)) return false;
  PeerId peer = server ? first.to_string() : PeerId();  // a client has one peer: the server
  zmq::message_t parts[2];
  std::size_t frames = 0;
  bool more = first.more();
  if (!server) {
    parts[frames++] = std::move(first);
  }
  // A multipart message arrives whole, so these receives never wait. Frames past the second are
  // only counted: the message is malformed anyway.
  while (more) {
    zmq::message_t m;
    (void)net.recv(m);
    more = m.more();
    if (frames < 2) parts[frames] = std::move(m);
    ++frames;
  }
  const FrameSizes sizes{frames, frames >= 1 ? parts[0].size() : 0,
                         frames >= 2 ? parts[1].size() : 0};
  Message msg;
  const Verdict v =
      check_message(parts[0].data<std::uint8_t>(), sizes, opt.limits, nullptr, &msg.header);
  if (!v.ok()) {
    drop_bad(server ? peer : endpoint, v);
    return true;
  }
  if (frames == 2) msg.payload = adopt_frame(std::move(parts[1]));
  msg.peer = peer;
  const Op op = msg.header.op;
  try {
    on_receive(std::move(msg));
  } catch (const std::exception& e) {
    // One message's failure must not take the endpoint down: log it and keep serving.
    spdlog::error("handling {} from {} failed: {}", op_name(op),
                  server ? peer_name(peer) : endpoint, e.what());
  }
  return true;
}

void ZmqTransport::Impl::drop_bad(const PeerId& peer, const Verdict& v) {
  if (bad.record(peer, v.problem))
    spdlog::warn(
        "dropping a bad message from {}: {} (further bad messages from this peer are "
        "counted, not logged)",
        peer_name(peer), v.reason);
}

bool ZmqTransport::Impl::take_from_outbox() {
  std::pair<PeerId, Outgoing> next;
  {
    std::lock_guard<std::mutex> lock(box.mu);
    if (box.queue.empty()) return false;
    next = std::move(box.queue.front());
    box.queue.pop_front();
  }
  box.room.notify_all();
  enqueue(std::move(next.first), std::move(next.second));
  return true;
}

// A server's peers are bounded one by one: a peer that does not read loses its own messages past
// its bound, and nobody else waits for it (the owner thread takes every other thread's sends at
// once). A client has one peer, the server: its senders wait for room instead (back-pressure).
void ZmqTransport::Impl::enqueue(PeerId peer, Outgoing out) {
  Backlog& b = pending[peer];
  if (server && (b.queue.size() >= peer_max_messages.load(std::memory_order_relaxed) ||
                 b.bytes + out.bytes() > peer_max_bytes.load(std::memory_order_relaxed))) {
    dropped.fetch_add(1, std::memory_order_relaxed);
    if (!b.logged) {
      b.logged = true;
      spdlog::warn(
          "dropping messages to {}: {} ({:.1f} MiB) wait unread, its bound (it does not read what "
          "it asked for; further drops are only counted)",
          peer_name(peer), b.queue.size(), b.bytes / 1048576.0);
    }
    if (b.queue.empty()) pending.erase(peer);
    return;
  }
  b.bytes += out.bytes();
  b.queue.push_back(std::move(out));
  ++pending_count;
}

bool ZmqTransport::Impl::flush() {
  bool progress = false;
  for (auto it = pending.begin(); it != pending.end();) {
    Backlog& b = it->second;
    while (!b.queue.empty()) {
      if (send_now(it->first, b.queue.front()) == SendResult::kBlocked) break;
      b.bytes -= b.queue.front().bytes();
      b.queue.pop_front();
      --pending_count;
      progress = true;
    }
    // Emptied: the peer reads again, and a later drop is worth a line again.
    it = b.queue.empty() ? pending.erase(it) : std::next(it);
  }
  return progress;
}

SendResult ZmqTransport::Impl::send_now(const PeerId& peer, Outgoing& out) {
  const auto more = zmq::send_flags::sndmore | zmq::send_flags::dontwait;
  const auto last = zmq::send_flags::dontwait;
  if (server) {
    // Only the first frame can be refused: once it is in, the peer's queue takes the rest.
    zmq::message_t id(peer.data(), peer.size());
    try {
      if (!net.send(id, more)) return SendResult::kBlocked;
    } catch (const zmq::error_t& e) {
      if (e.num() != EHOSTUNREACH) throw;
      if (unreachable_logged.size() < BadMessageCounter::kMaxPeers &&
          unreachable_logged.insert(peer).second)
        spdlog::warn("dropping messages to {}: not connected", peer_name(peer));
      return SendResult::kUnreachable;
    }
    (void)net.send(out.header, out.has_payload ? more : last);
  } else if (!net.send(out.header, out.has_payload ? more : last)) {
    return SendResult::kBlocked;
  }
  if (out.has_payload) (void)net.send(out.payload, last);
  return SendResult::kSent;
}

// --- the public face --------------------------------------------------------------------------

ZmqTransport::ZmqTransport(ZmqOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

ZmqTransport::~ZmqTransport() {
  try {
    stop();
  } catch (const std::exception& e) {
    // Only stop() from the receive callback throws; destroying the transport there is a bug that
    // the still-joinable owner thread then turns into std::terminate.
    spdlog::error("destroying the transport on {}: {}", impl_->endpoint, e.what());
  }
}

void ZmqTransport::start(ReceiveFn on_receive) {
  std::lock_guard<std::mutex> lock(impl_->stop_mu);
  if (impl_->started || impl_->stopped)
    throw Error("transport on " + impl_->endpoint + " was already started");
  impl_->started = true;
  impl_->state = Impl::State::kRunning;
  impl_->on_receive = std::move(on_receive);
  // The owner thread names itself ("ps-server"/"ps-client" or ZmqOptions::thread_name) in run().
  impl_->owner = std::thread([impl = impl_.get()] { impl->run(); });
}

bool ZmqTransport::send(Message msg) {
  return hand_over(std::move(msg), std::chrono::milliseconds(-1));
}

bool ZmqTransport::try_send(Message msg, std::chrono::milliseconds wait) {
  return hand_over(std::move(msg), std::max(wait, std::chrono::milliseconds(0)));
}

void ZmqTransport::check_send(const Message& msg) const {
  const Header& h = msg.header;
  const bool carries = payload_kind(h.op) != PayloadKind::kNone;
  if (!carries && !msg.payload.empty())
    throw Error(std::string("send: ") + op_name(h.op) + " carries no payload, but one of " +
                std::to_string(msg.payload.size()) + " bytes was given");
  if (carries && msg.payload.size() != h.length)
    throw Error(std::string("send: ") + op_name(h.op) + " payload is " +
                std::to_string(msg.payload.size()) + " bytes but the header says " +
                std::to_string(h.length));
  if (h.length > impl_->opt.limits.max_message_bytes)
    throw Error("send: length " + std::to_string(h.length) + " exceeds the maximum message size " +
                std::to_string(impl_->opt.limits.max_message_bytes));
  if (impl_->server && msg.peer.empty())
    throw Error("send: a server must name the peer (Message::peer)");
  // Before start() nothing drains the mailbox: a send would wait forever.
  if (impl_->state.load() == Impl::State::kNew)
    throw Error("send on " + impl_->endpoint + " before start()");
}

bool ZmqTransport::hand_over(Message msg, std::chrono::milliseconds wait) {
  check_send(msg);
  if (impl_->state.load() == Impl::State::kStopped) return false;

  const HeaderBytes bytes = encode_header(msg.header);
  Outgoing out{zmq::message_t(bytes.data(), bytes.size()), zero_copy_frame(msg.payload),
               !msg.payload.empty()};
  if (std::this_thread::get_id() == impl_->owner_id.load()) {
    // From inside the callback: the owner thread can't wait on itself, so queue directly.
    impl_->enqueue(std::move(msg.peer), std::move(out));
    return true;
  }
  if (wait.count() < 0) transport_thread::assert_may_block("a send that waits for room");
  Mailbox& box = impl_->box;
  {
    std::unique_lock<std::mutex> lock(box.mu);
    const std::size_t depth = impl_->server ? kServerMailboxDepth : kClientMailboxDepth;
    const auto room = [&] { return box.closed || box.queue.size() < depth; };
    if (wait.count() < 0)
      box.room.wait(lock, room);
    else if (!box.room.wait_for(lock, wait, room))
      return false;  // no room within `wait`: dropped
    if (box.closed) return false;
    box.queue.emplace_back(std::move(msg.peer), std::move(out));
    // Under the lock, so that stop() (which takes it) is a barrier before the eventfd closes.
    if (box.sleeping && !box.signalled) {
      box.signalled = true;
      box.wake();
    }
  }
  return true;
}

void ZmqTransport::release_senders() {
  std::lock_guard<std::mutex> lock(impl_->stop_mu);
  if (impl_->stopped || impl_->state.load() == Impl::State::kStopped) return;
  impl_->state = Impl::State::kStopped;
  impl_->close_mailbox();
  impl_->ctx.shutdown();  // wakes the owner thread, which ends
}

void ZmqTransport::stop() {
  if (std::this_thread::get_id() == impl_->owner_id.load())
    throw Error("stop() called from the receive callback: it would join its own thread");
  std::lock_guard<std::mutex> lock(impl_->stop_mu);
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->state = Impl::State::kStopped;
  // Callers blocked in send() return false; shutting the context down wakes the owner's poll.
  impl_->close_mailbox();
  impl_->ctx.shutdown();
  if (impl_->owner.joinable()) impl_->owner.join();
  {
    // What the owner never took is dropped (its payload references with it).
    std::lock_guard<std::mutex> lock(impl_->box.mu);
    impl_->box.queue.clear();
  }
  if (!impl_->started) impl_->net.close();
  if (impl_->zap) impl_->zap->stop();  // its sockets closed; its counts kept
  impl_->ctx.close();                  // waits up to `linger` for frames already inside ZeroMQ
}

std::string ZmqTransport::endpoint() const { return impl_->endpoint; }

const BadMessageCounter& ZmqTransport::bad_messages() const { return impl_->bad; }

std::uint64_t ZmqTransport::dropped_unread() const {
  return impl_->dropped.load(std::memory_order_relaxed);
}

void ZmqTransport::set_peer_bounds(std::size_t messages, std::size_t bytes) {
  impl_->peer_max_messages = messages;
  impl_->peer_max_bytes = bytes;
}

std::string ZmqTransport::refused_connections() const {
  return impl_->zap ? impl_->zap->describe() : std::string();
}

const zmq::message_t& ZmqTransport::frame_of(const Payload& received) {
  return *static_cast<const zmq::message_t*>(received.owner().get());
}

}  // namespace psbed::ps
