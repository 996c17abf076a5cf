// Authenticated, encrypted links (ZeroMQ CURVE), for `--keys DIR`.
//
// Every node has its own key pair. A binding socket (the coordinator, a shard) is a CURVE server
// and asks its ZAP handler about each connecting client: only public keys listed in
// DIR/authorized_keys get in. A connecting socket (a node's link to the coordinator, a worker's
// link to a shard, ctl) uses its own pair and must know the server's public key: the
// coordinator's from DIR/coordinator.pub, a shard's from the cluster map (a shard gives it when
// it registers). The key folder's layout is in docs/security.md; `psbed keys` writes one.
//
// Without keys (CurveKeys::on() false) none of this is set up: the sockets are as before.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace zmq {
class context_t;
class socket_t;
}  // namespace zmq

namespace psbed::ps {

struct KeyPair {
  std::string public_key, secret_key;  // Z85 text, 40 characters each
};

struct CurveKeys {
  KeyPair own;             // this node's pair; empty: no CURVE
  std::string server_key;  // a connecting socket: the server's public key (Z85)
  // A binding socket: the client public keys (Z85) it lets in.
  std::shared_ptr<const std::set<std::string>> authorized;
  std::string name;  // the node's, for its log lines
  bool on() const { return !own.secret_key.empty(); }
};

// Throws psbed::Error when this libzmq was built without CURVE.
void require_curve();
KeyPair make_key_pair();
// "NAME.key" holds the secret key (the public one is derived from it); "NAME.pub" the public key;
// authorized_keys one public key per line, then optionally a name (a line whose first word is no
// key but starts with '#' is a comment; '#' is also a Z85 character).
// Errors name the file and what was expected.
KeyPair read_secret_key(const std::string& path);
std::string read_public_key(const std::string& path);
std::set<std::string> read_authorized_keys(const std::string& path);
bool valid_z85_key(const std::string& key);

// Writes DIR/NAME.key (mode 0600) and DIR/NAME.pub for every name, and DIR/authorized_keys
// listing every public key. Refuses to overwrite an existing key. Returns the files written.
std::vector<std::string> write_key_set(const std::string& dir,
                                       const std::vector<std::string>& names);

// What a node started with `--keys DIR` (and `--key FILE`, else DIR/<name>.key) uses: its pair,
// the coordinator's public key as server_key and the authorized list. `flag` names the option in
// errors. An empty `dir` gives CurveKeys{} (no CURVE).
CurveKeys node_keys(const std::string& dir, const std::string& key_file, const std::string& name);

class ZapHandler;
// Makes `net` (not bound or connected yet) a CURVE server (`server`) or client with `keys`; a
// server gets its gatekeeper, returned. Throws psbed::Error naming what is missing.
std::unique_ptr<ZapHandler> secure_socket(zmq::context_t& ctx, zmq::socket_t& net,
                                          const CurveKeys& keys, bool server);

// A binding socket's gatekeeper: answers ZeroMQ's authentication requests (ZAP) on the socket's
// context, letting in listed client keys only, and watches the socket for handshakes that fail
// (a client without CURVE, or with the wrong server key). Each refused key, and the first
// failed handshake, is logged once; the rest are counted. Its thread ends when the context is
// shut down or this is destroyed.
class ZapHandler {
 public:
  // Before `net` binds: a connection that comes before the handler would be let in unchecked.
  ZapHandler(zmq::context_t& ctx, zmq::socket_t& net,
             std::shared_ptr<const std::set<std::string>> authorized, std::string endpoint_name);
  ~ZapHandler();  // stop()s
  // Ends the thread, closing its sockets (before the context closes); the counts stay.
  void stop();
  ZapHandler(const ZapHandler&) = delete;
  ZapHandler& operator=(const ZapHandler&) = delete;
  std::uint64_t refused() const { return refused_.load(); }  // listed-key refusals
  std::uint64_t failed_handshakes() const { return failed_.load(); }
  // "" or "refused N connection(s): ..." for a node's closing lines.
  std::string describe() const;

 private:
  void run(std::unique_ptr<zmq::socket_t> zap, std::unique_ptr<zmq::socket_t> monitor);
  void answer(zmq::socket_t& zap);
  void watch(zmq::socket_t& monitor);

  std::shared_ptr<const std::set<std::string>> authorized_;
  std::string name_;
  std::atomic<std::uint64_t> refused_{0}, failed_{0};
  std::atomic<bool> stop_{false};
  std::set<std::string> logged_;  // refused keys already logged (the thread's own)
  std::thread thread_;
};

}  // namespace psbed::ps
