#include "ps/curve.hpp"

#include <pthread.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <zmq.hpp>

#include "core/error.hpp"

namespace psbed::ps {
namespace {

constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";  // fixed by ZeroMQ (RFC 27)
constexpr const char* kMonitor = "inproc://psbed-handshakes";   // one context per transport
constexpr std::size_t kMaxLoggedKeys = 1024;  // past this, refusals are only counted
constexpr int kPollMs = 200;                  // how soon the thread sees stop_

std::string first_line(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  if (!in)
    throw Error("cannot read " + what + " '" + path + "': " + std::strerror(errno) +
                " (expected a key file as `psbed keys` writes)");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string word;
    // '#' is a Z85 character too: a comment is a line whose first word is no key.
    if ((words >> word) && (word[0] != '#' || valid_z85_key(word))) return word;
  }
  throw Error(what + " '" + path + "' is empty (expected a 40-character Z85 key)");
}

std::string z85(const std::uint8_t* bytes32) {
  char text[41];
  zmq_z85_encode(text, bytes32, 32);
  return text;
}

}  // namespace

void require_curve() {
  if (!zmq_has("curve"))
    throw Error(
        "--keys: this libzmq was built without CURVE (zmq_has(\"curve\") is false): rebuild it "
        "with libsodium, or run without --keys");
}

bool valid_z85_key(const std::string& key) {
  if (key.size() != 40) return false;
  std::uint8_t bytes[32];
  return zmq_z85_decode(bytes, key.c_str()) != nullptr;
}

KeyPair make_key_pair() {
  require_curve();
  char pub[41], sec[41];
  if (zmq_curve_keypair(pub, sec) != 0)
    throw Error(std::string("cannot make a CURVE key pair: ") + zmq_strerror(zmq_errno()));
  return {pub, sec};
}

KeyPair read_secret_key(const std::string& path) {
  KeyPair k;
  k.secret_key = first_line(path, "secret key");
  char pub[41];
  if (!valid_z85_key(k.secret_key) || zmq_curve_public(pub, k.secret_key.c_str()) != 0)
    throw Error("secret key '" + path + "' is not a CURVE key (expected 40 Z85 characters)");
  k.public_key = pub;
  return k;
}

std::string read_public_key(const std::string& path) {
  std::string key = first_line(path, "public key");
  if (!valid_z85_key(key))
    throw Error("public key '" + path + "' is not a CURVE key (expected 40 Z85 characters)");
  return key;
}

std::set<std::string> read_authorized_keys(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw Error("cannot read the authorized keys '" + path + "': " + std::strerror(errno) +
                " (expected a file as `psbed keys` writes)");
  std::set<std::string> keys;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    std::istringstream words(line);
    std::string key;
    // '#' is a Z85 character too: a comment is a line whose first word is no key.
    if (!(words >> key) || (key[0] == '#' && !valid_z85_key(key))) continue;
    if (!valid_z85_key(key))
      throw Error(path + ":" + std::to_string(n) + ": '" + key.substr(0, 60) +
                  "' is not a CURVE public key (expected 40 Z85 characters, then a name)");
    keys.insert(key);
  }
  if (keys.empty())
    throw Error("the authorized keys '" + path + "' list no key: nobody could connect");
  return keys;
}

std::vector<std::string> write_key_set(const std::string& dir,
                                       const std::vector<std::string>& names) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error("--out: cannot create '" + dir + "': " + ec.message());
  for (const auto& name : names) {
    if (name.empty() || name.find_first_of("/ \t#") != std::string::npos)
      throw Error("a key name must be a node name without '/', spaces or '#', got '" + name + "'");
    if (fs::exists(dir + "/" + name + ".key"))
      throw Error("--out: '" + dir + "/" + name +
                  ".key' exists already (a key is not overwritten: give another --out)");
  }
  std::vector<std::string> written;
  std::string list = "# CURVE public keys the coordinator and the shards let in (psbed keys)\n";
  for (const auto& name : names) {
    const KeyPair k = make_key_pair();
    const std::string secret = dir + "/" + name + ".key";
    // Created 0600 before anything is in it: the secret is never readable by others.
    const mode_t old = ::umask(077);
    {
      std::ofstream out(secret);
      out << k.secret_key << "\n";
      if (!out) {
        ::umask(old);
        throw Error("cannot write '" + secret + "': " + std::strerror(errno));
      }
    }
    ::umask(old);
    ::chmod(secret.c_str(), 0600);
    std::ofstream(dir + "/" + name + ".pub") << k.public_key << "\n";
    list += k.public_key + " " + name + "\n";
    written.push_back(secret);
    written.push_back(dir + "/" + name + ".pub");
  }
  std::ofstream out(dir + "/authorized_keys");
  out << list;
  if (!out) throw Error("cannot write '" + dir + "/authorized_keys': " + std::strerror(errno));
  written.push_back(dir + "/authorized_keys");
  return written;
}

CurveKeys node_keys(const std::string& dir, const std::string& key_file, const std::string& name) {
  CurveKeys k;
  if (dir.empty() && key_file.empty()) return k;
  if (dir.empty()) throw Error("--key needs --keys DIR (the authorized keys and coordinator.pub)");
  require_curve();
  try {
    k.name = name;
    k.own = read_secret_key(key_file.empty() ? dir + "/" + name + ".key" : key_file);
    // Each read only where present: a pod is given only the files its role needs.
    if (std::ifstream(dir + "/coordinator.pub"))
      k.server_key = read_public_key(dir + "/coordinator.pub");
    if (std::ifstream(dir + "/authorized_keys"))
      k.authorized = std::make_shared<const std::set<std::string>>(
          read_authorized_keys(dir + "/authorized_keys"));
  } catch (const Error& e) {
    throw Error(std::string("--keys: ") + e.what());
  }
  return k;
}

std::unique_ptr<ZapHandler> secure_socket(zmq::context_t& ctx, zmq::socket_t& net,
                                          const CurveKeys& keys, bool server) {
  require_curve();
  if (server && !keys.authorized)
    throw Error("--keys: no authorized_keys for " + keys.name + " (it lets in only listed keys)");
  if (!server && keys.server_key.empty())
    throw Error("--keys: " + keys.name + " has no public key of the server it connects to");
  net.set(zmq::sockopt::curve_secretkey, keys.own.secret_key);
  net.set(zmq::sockopt::curve_publickey, keys.own.public_key);
  if (!server) {
    net.set(zmq::sockopt::curve_serverkey, keys.server_key);
    return nullptr;
  }
  net.set(zmq::sockopt::curve_server, true);
  return std::make_unique<ZapHandler>(ctx, net, keys.authorized, keys.name);
}

// --- the gatekeeper ---------------------------------------------------------------------------

ZapHandler::ZapHandler(zmq::context_t& ctx, zmq::socket_t& net,
                       std::shared_ptr<const std::set<std::string>> authorized,
                       std::string endpoint_name)
    : authorized_(std::move(authorized)), name_(std::move(endpoint_name)) {
  auto zap = std::make_unique<zmq::socket_t>(ctx, zmq::socket_type::rep);
  zap->set(zmq::sockopt::linger, 0);
  zap->bind(kZapEndpoint);
  // Handshakes that never reach the handler (a client without CURVE, a wrong server key) show
  // only as socket events.
  if (zmq_socket_monitor(
          net.handle(), kMonitor,
          ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) != 0)
    throw Error(std::string("cannot watch the socket's handshakes: ") + zmq_strerror(zmq_errno()));
  auto monitor = std::make_unique<zmq::socket_t>(ctx, zmq::socket_type::pair);
  monitor->set(zmq::sockopt::linger, 0);
  monitor->connect(kMonitor);
  thread_ = std::thread([this, z = zap.release(), m = monitor.release()] {
    run(std::unique_ptr<zmq::socket_t>(z), std::unique_ptr<zmq::socket_t>(m));
  });
}

ZapHandler::~ZapHandler() { stop(); }

void ZapHandler::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void ZapHandler::run(std::unique_ptr<zmq::socket_t> zap, std::unique_ptr<zmq::socket_t> monitor) {
  pthread_setname_np(pthread_self(), "ps-zap");
  try {
    while (!stop_) {
      zmq_pollitem_t items[] = {{zap->handle(), 0, ZMQ_POLLIN, 0},
                                {monitor->handle(), 0, ZMQ_POLLIN, 0}};
      zmq::poll(items, 2, std::chrono::milliseconds(kPollMs));
      if (items[0].revents & ZMQ_POLLIN) answer(*zap);
      if (items[1].revents & ZMQ_POLLIN) watch(*monitor);
    }
  } catch (const zmq::error_t& e) {
    if (e.num() != ETERM) spdlog::error("{}: the CURVE gatekeeper failed: {}", name_, e.what());
  }
  zap->close();
  monitor->close();
}

// One request, one reply, never waiting: ZeroMQ's I/O thread holds the handshake until then.
void ZapHandler::answer(zmq::socket_t& zap) {
  std::vector<zmq::message_t> frames;
  do {
    frames.emplace_back();
    if (!zap.recv(frames.back(), zmq::recv_flags::dontwait)) return;
  } while (frames.back().more());
  // version, request id, domain, address, routing id, mechanism, credentials...
  const bool well_formed = frames.size() >= 6 && frames[0].to_string() == "1.0";
  const std::string request_id = frames.size() > 1 ? frames[1].to_string() : "";
  const std::string address = frames.size() > 3 ? frames[3].to_string() : "?";
  std::string key;
  if (well_formed && frames[5].to_string() == "CURVE" && frames.size() >= 7 &&
      frames[6].size() == 32)
    key = z85(frames[6].data<std::uint8_t>());
  const bool ok = !key.empty() && authorized_ && authorized_->count(key) > 0;
  if (!ok) {
    refused_.fetch_add(1);
    const std::string shown = key.empty() ? "(no CURVE key)" : key;
    if (logged_.size() < kMaxLoggedKeys && logged_.insert(shown).second)
      spdlog::warn(
          "{}: refused a connection from {}: public key {} is not in the authorized keys (further "
          "attempts with this key are counted, not logged)",
          name_, address, shown);
  }
  const std::string code = ok ? "200" : "400", text = ok ? "OK" : "key not authorized";
  zap.send(zmq::buffer(std::string("1.0")), zmq::send_flags::sndmore);
  zap.send(zmq::buffer(request_id), zmq::send_flags::sndmore);
  zap.send(zmq::buffer(code), zmq::send_flags::sndmore);
  zap.send(zmq::buffer(text), zmq::send_flags::sndmore);
  zap.send(zmq::buffer(std::string()), zmq::send_flags::sndmore);  // user id
  zap.send(zmq::buffer(std::string()), zmq::send_flags::none);     // metadata
}

void ZapHandler::watch(zmq::socket_t& monitor) {
  zmq::message_t event, where;
  if (!monitor.recv(event, zmq::recv_flags::dontwait)) return;
  if (event.more()) (void)monitor.recv(where);
  if (failed_.fetch_add(1) == 0)
    spdlog::warn(
        "{}: refused a connection whose handshake failed (a client without CURVE, or with another "
        "server key; further ones are counted, not logged)",
        name_);
}

std::string ZapHandler::describe() const {
  const std::uint64_t r = refused(), f = failed_handshakes();
  if (r + f == 0) return "";
  return "refused " + std::to_string(r) + " connection(s) with an unlisted key and " +
         std::to_string(f) + " failed handshake(s) (no CURVE or a wrong server key)";
}

}  // namespace psbed::ps
