// CURVE (ps/curve.hpp): key files as `psbed keys` writes them, and a server transport that lets
// in listed client keys only, counting the rest.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/error.hpp"
#include "ps/curve.hpp"
#include "transport_test_util.hpp"

using namespace psbed::ps;
using namespace psbed::ps::test;

namespace {

struct TempDir {
  std::string path = std::filesystem::temp_directory_path() /
                     ("psbed-curve-" + std::to_string(::getpid()) + "-" +
                      std::to_string(reinterpret_cast<std::uintptr_t>(this)));
  ~TempDir() { std::filesystem::remove_all(path); }
};

// Answers every message with an ack to its sender.
void start_acking(ZmqTransport& server) {
  server.start([&server](Message&& m) {
    Message ack;
    ack.header.op = Op::kPushAck;
    ack.header.sequence = m.header.sequence;
    ack.peer = m.peer;
    server.send(std::move(ack));
  });
}

Message ping(std::uint64_t sequence) {
  Message m;
  m.header.op = Op::kHeartbeat;
  m.header.sequence = sequence;
  return m;
}

}  // namespace

TEST_CASE("psbed keys' files: secret keys 0600, public keys derived, all listed", "[ps][curve]") {
  TempDir dir;
  write_key_set(dir.path, {"coordinator", "worker-0"});
  struct stat st {};
  REQUIRE(::stat((dir.path + "/worker-0.key").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  const KeyPair k = read_secret_key(dir.path + "/worker-0.key");
  CHECK(k.public_key == read_public_key(dir.path + "/worker-0.pub"));
  const auto listed = read_authorized_keys(dir.path + "/authorized_keys");
  CHECK(listed.size() == 2);
  CHECK(listed.count(k.public_key) == 1);
  // A key is never overwritten.
  CHECK_THROWS_AS(write_key_set(dir.path, {"worker-0"}), psbed::Error);
  const CurveKeys node = node_keys(dir.path, "", "worker-0");
  CHECK(node.on());
  CHECK(node.server_key == read_public_key(dir.path + "/coordinator.pub"));
  CHECK(node_keys("", "", "worker-0").on() == false);
}

TEST_CASE("a bad key file is refused naming the file and line", "[ps][curve]") {
  TempDir dir;
  std::filesystem::create_directories(dir.path);
  std::ofstream(dir.path + "/authorized_keys")
      << "# comment\n"
      << make_key_pair().public_key << " worker-0\nnot-a-key worker-1\n";
  try {
    read_authorized_keys(dir.path + "/authorized_keys");
    FAIL("a bad line was accepted");
  } catch (const psbed::Error& e) {
    CHECK(std::string(e.what()).find("authorized_keys:3") != std::string::npos);
  }
  std::ofstream(dir.path + "/x.key") << "short\n";
  CHECK_THROWS_AS(read_secret_key(dir.path + "/x.key"), psbed::Error);
  CHECK_THROWS_AS(node_keys(dir.path, "", "missing"), psbed::Error);
}

TEST_CASE("a CURVE server answers a listed key only, and counts the others", "[ps][curve]") {
  const KeyPair server_pair = make_key_pair(), listed = make_key_pair(), other = make_key_pair();
  ZmqOptions so = server_options();
  so.curve.own = server_pair;
  so.curve.name = "test-server";
  so.curve.authorized =
      std::make_shared<const std::set<std::string>>(std::set<std::string>{listed.public_key});
  ZmqTransport server(so);
  start_acking(server);
  auto client_with = [&](const KeyPair* pair, const std::string& id) {
    ZmqOptions co = client_options(server.endpoint(), id);
    if (pair) co.curve.own = *pair, co.curve.server_key = server_pair.public_key;
    co.curve.name = id;
    return co;
  };
  auto rogue_inbox = std::make_shared<Inbox>();
  ZmqTransport unlisted(client_with(&other, "unlisted"));
  unlisted.start(into(rogue_inbox));
  ZmqTransport plain(client_with(nullptr, "plain"));
  plain.start(into(rogue_inbox));
  (void)unlisted.try_send(ping(1), std::chrono::milliseconds(100));  // queued until a handshake
  (void)plain.try_send(ping(2), std::chrono::milliseconds(100));

  Inbox inbox;
  ZmqTransport good(client_with(&listed, "listed"));
  good.start(inbox.fn());
  REQUIRE(good.send(ping(3)));
  REQUIRE(inbox.wait_for(1));
  CHECK(inbox.messages()[0].header.sequence == 3);
  // The rogues had as long as the listed client and more: nothing reached the server from them.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(rogue_inbox->messages().empty());
  const std::string refused = server.refused_connections();
  INFO(refused);
  CHECK(refused.find("refused ") == 0);
  CHECK(refused.find(" 0 connection") == std::string::npos);
  CHECK(refused.find(" 0 failed") == std::string::npos);
  unlisted.stop();
  plain.stop();
  good.stop();
  server.stop();
}
