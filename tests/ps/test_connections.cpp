// --connections: how requests are cut into stripes (hand-computed), which connection identities
// a shard takes a worker's id from, and over ZeroMQ: bsp training over 2 connections a shard
// ends with the parameters of 1, bit for bit, while a shard that expects 1 refuses the second.
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "core/model_spec.hpp"
#include "core/param_init.hpp"
#include "core/partition.hpp"
#include "loopback_shard.hpp"
#include "ps/client.hpp"

using namespace psbed;
using namespace psbed::ps;

namespace {

bool same_pieces(const std::vector<PsClient::Piece>& got,
                 const std::vector<PsClient::Piece>& want) {
  if (got.size() != want.size()) return false;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i].connection != want[i].connection || got[i].offset != want[i].offset ||
        got[i].count != want[i].count)
      return false;
  return true;
}

// One fc layer of 128 x 512 weights (256 KiB: two stripes of 128 KiB over 2 connections) and
// 512 biases (2 KiB: whole, on one connection), bsp, momentum, on one shard.
ClusterMap striped_map(int connections, const std::string& link_prefix) {
  const char* toml = "input = [1, 1, 128]\nclasses = 512\n[[layer]]\ntype = \"fc\"\nout = 512\n";
  ClusterMap m;
  m.exp.model_name = "striped";
  m.exp.model_toml = toml;
  m.exp.mode = Consistency::parse("bsp");
  m.exp.sgd = {0.5f, 0.9f, 0.0f};
  m.exp.steps = 100;
  m.exp.connections = connections;
  m.spec = parse_model_spec(toml, "striped");
  m.plan = make_partition(m.spec, 1 << 20, 1);
  m.servers.push_back({"server", 0, "server-0", "x", "", ""});
  for (int w = 0; w < 2; ++w)
    m.workers.push_back({"worker", w, "worker-" + std::to_string(w), "",
                         link_prefix + std::to_string(w) + "#0123456789abcdef", ""});
  return m;
}

struct Trained {
  std::vector<std::vector<float>> params;
  std::uint64_t refused = 0;
  bool answered = true;
};

// Two workers, three bsp steps; each pushes its parts in slices of 10,000 floats (crossing the
// stripe boundary at 32,768), then pulls them whole. Gradients are multiples of 1/8, so the order
// in which the shard sums them cannot round differently between runs.
Trained train_striped(int client_connections, int shard_connections, double wait_s = 10) {
  const ClusterMap shard_map = striped_map(shard_connections, "worker-");
  ClusterMap client_map = shard_map;
  client_map.exp.connections = client_connections;
  LoopbackShard server(shard_map, 1 << 24, shard_connections);
  client_map.servers[0].address = server.endpoint();
  std::vector<std::unique_ptr<PsClient>> clients;
  std::vector<std::vector<std::vector<float>>> params(2), grads(2);
  for (int w = 0; w < 2; ++w) {
    clients.push_back(std::make_unique<PsClient>(client_map, w, shard_map.workers[w].link_id));
    for (const auto& t : shard_map.spec.tensors) {
      params[std::size_t(w)].emplace_back(std::size_t(t.numel), 0.0f);
      grads[std::size_t(w)].emplace_back(std::size_t(t.numel), 0.0f);
    }
  }
  const auto& parts = shard_map.plan.parts;
  constexpr std::int64_t kSlice = 10000;
  Trained out;
  for (std::uint64_t step = 0; step < 3 && out.answered; ++step) {
    int pushes = 0;
    for (const Part& p : parts) pushes += int((p.numel + kSlice - 1) / kSlice);
    Countdown pushed(2 * pushes);
    for (int w = 0; w < 2; ++w) {
      for (auto& g : grads[std::size_t(w)])
        for (std::size_t i = 0; i < g.size(); ++i)
          g[i] = float((int(step) + 1) * (w + 1) * int(i + 1) % 7) / 8.0f;
      for (int i = 0; i < int(parts.size()); ++i) {
        const Part& p = parts[std::size_t(i)];
        const float* g = grads[std::size_t(w)][std::size_t(p.key)].data() + p.offset;
        for (std::int64_t at = 0; at < p.numel; at += kSlice)
          clients[std::size_t(w)]->push(i, g + at, at, std::min(kSlice, p.numel - at), step, 0,
                                        [&] { pushed.done(); });
      }
    }
    out.answered = pushed.wait(wait_s);
    if (!out.answered) break;
    Countdown pulled(2 * int(parts.size()));
    for (int w = 0; w < 2; ++w)
      for (int i = 0; i < int(parts.size()); ++i) {
        const Part& p = parts[std::size_t(i)];
        clients[std::size_t(w)]->pull(i,
                                      params[std::size_t(w)][std::size_t(p.key)].data() + p.offset,
                                      0, p.numel, step + 1, 0, [&] { pulled.done(); });
      }
    out.answered = pulled.wait(wait_s);
  }
  for (auto& c : clients) c->stop();
  server.stop();
  out.refused = server.shard().bad().total();
  if (out.answered) {
    CHECK(params[0] == params[1]);
    out.params = params[0];
  }
  return out;
}

}  // namespace

TEST_CASE("stripes cut a request at the part's stripe boundaries", "[ps][connections]") {
  using P = PsClient::Piece;
  // One connection: the request as it is.
  CHECK(same_pieces(PsClient::stripes(3, 1 << 20, 5, 100, 1), {P{0, 5, 100}}));
  // Below connections x 64 KiB (32,768 floats for 2): whole, on part_index % connections.
  CHECK(same_pieces(PsClient::stripes(3, 32767, 0, 32767, 2), {P{1, 0, 32767}}));
  CHECK(same_pieces(PsClient::stripes(4, 100, 10, 20, 2), {P{0, 10, 20}}));
  // 40,000 floats over 2: stripes of 20,000.
  CHECK(
      same_pieces(PsClient::stripes(0, 40000, 0, 40000, 2), {P{0, 0, 20000}, P{1, 20000, 20000}}));
  CHECK(same_pieces(PsClient::stripes(0, 40000, 19990, 20, 2), {P{0, 19990, 10}, P{1, 20000, 10}}));
  CHECK(same_pieces(PsClient::stripes(0, 40000, 25000, 100, 2), {P{1, 25000, 100}}));
  // 50,000 over 3: stripes of 16,667, the last one short.
  CHECK(same_pieces(PsClient::stripes(7, 50000, 0, 50000, 3),
                    {P{0, 0, 16667}, P{1, 16667, 16667}, P{2, 33334, 16666}}));
  // Empty, or past the part (the shard refuses it and says why): one piece, still sent.
  CHECK(same_pieces(PsClient::stripes(0, 40000, 25000, 0, 2), {P{1, 25000, 0}}));
  CHECK(same_pieces(PsClient::stripes(0, 40000, 39990, 20, 2), {P{1, 39990, 20}}));
  CHECK(same_pieces(PsClient::stripes(0, 40000, 90000, 10, 2), {P{1, 90000, 10}}));
}

TEST_CASE("a shard takes a worker's id from its link id and its numbered connections only",
          "[ps][connections]") {
  const std::string id = "worker-0#00112233445566778899aabbccddeeff";
  CHECK(connection_identity(id, 0) == id);
  CHECK(connection_identity(id, 3) == id + "~3");
  CHECK(link_id_matches(id, id, 1));
  CHECK(link_id_matches(id + "~1", id, 2));
  CHECK(link_id_matches(id + "~7", id, 8));
  CHECK_FALSE(link_id_matches(id + "~1", id, 1));  // no second connection in this run
  CHECK_FALSE(link_id_matches(id + "~2", id, 2));  // past the last
  CHECK_FALSE(link_id_matches(id + "~0", id, 2));  // the first is the link id itself
  CHECK_FALSE(link_id_matches(id + "~a", id, 2));
  CHECK_FALSE(link_id_matches(id + "x", id, 2));
  CHECK_FALSE(link_id_matches(id + "~11", id, 8));
  CHECK_FALSE(link_id_matches(id.substr(0, 10), id, 2));
  CHECK_FALSE(link_id_matches("worker-1#00112233445566778899aabbccddeeff", id, 2));
}

TEST_CASE("bsp over 2 connections a shard ends with the parameters of 1, bit for bit",
          "[ps][connections]") {
  const Trained one = train_striped(1, 1), two = train_striped(2, 2);
  REQUIRE(one.answered);
  REQUIRE(two.answered);
  CHECK(one.refused == 0);
  CHECK(two.refused == 0);
  CHECK(one.params == two.params);
  // And they trained: the weights moved from their initial values.
  const ClusterMap map = striped_map(1, "worker-");
  std::vector<float> w0(std::size_t(map.spec.tensors[0].numel));
  init_tensor(map.spec, 0, map.exp.seed, w0.data());
  CHECK(one.params[0] != w0);
}

TEST_CASE("a shard expecting 1 connection refuses a worker's second and counts it",
          "[ps][connections]") {
  // The weights' second stripe goes on connection 1, whose identity (link id + "~1") this shard
  // does not take: those pushes are refused and never answered.
  const Trained t = train_striped(2, 1, 2);
  CHECK_FALSE(t.answered);
  CHECK(t.refused > 0);
}
