// The coordinator's HTTP layer on its own: address and request-head parsing, a live server
// answering well-formed and malformed requests (and going on serving), the token, answers that
// come later from another thread or after the server stopped, the routes, and the Prometheus
// text writer.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "core/error.hpp"
#include "ps/coordinator_http.hpp"
#include "ps/http_server.hpp"
#include "ps/metrics.hpp"

using namespace psbed::ps;
using json = nlohmann::json;

namespace {

// Sends `raw` to 127.0.0.1:port, half-closes, and returns everything the server answers before
// it closes.
std::string round_trip(std::uint16_t port, const std::string& raw) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  for (std::size_t sent = 0; sent < raw.size();) {
    const ssize_t n = ::send(fd, raw.data() + sent, raw.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may answer and stop reading before all of a huge request
    sent += std::size_t(n);
  }
  ::shutdown(fd, SHUT_WR);  // all sent: a server waiting for more sees the end at once
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, std::size_t(n));
  ::close(fd);
  return out;
}

int status_of(const std::string& response) {
  return response.size() > 12 ? std::stoi(response.substr(9, 3)) : 0;
}

std::string body_of(const std::string& response) {
  const auto at = response.find("\r\n\r\n");
  return at == std::string::npos ? "" : response.substr(at + 4);
}

// Echoes method, path, a query parameter and the body.
HttpHandler echo() {
  return [](const HttpRequest& req, HttpRespond respond) {
    respond(HttpResponse::json(200, {{"method", req.method},
                                     {"path", req.path},
                                     {"x", req.query_param("x").value_or("-")},
                                     {"body", req.body}}));
  };
}

}  // namespace

TEST_CASE("HTTP addresses: loopback by default, bad ones named", "[ps][http]") {
  CHECK(parse_http_address("8080").host == "127.0.0.1");
  CHECK(parse_http_address(":8080").port == 8080);
  CHECK(parse_http_address(":8080").loopback());
  CHECK(parse_http_address("0.0.0.0:0").port == 0);
  CHECK_FALSE(parse_http_address("0.0.0.0:0").loopback());
  CHECK(parse_http_address("[::1]:80").host == "::1");
  CHECK(parse_http_address("[::1]:80").loopback());
  CHECK(parse_http_address("localhost:1").loopback());
  CHECK_THROWS_WITH(parse_http_address("host:port"), Catch::Contains("port must be a number"));
  CHECK_THROWS_WITH(parse_http_address("1.2.3.4:70000"), Catch::Contains("'1.2.3.4:70000'"));
  CHECK_THROWS_AS(parse_http_address("::1:80"), psbed::Error);
}

TEST_CASE("HTTP request heads parse, and malformed ones are named", "[ps][http]") {
  HttpRequest r;
  REQUIRE_FALSE(parse_http_head(
      "POST /api/policy?token=a%20b&x=1 HTTP/1.1\r\nContent-Length: 5\r\nX-A:  b \r\n", r));
  CHECK(r.method == "POST");
  CHECK(r.path == "/api/policy");
  CHECK(r.query_param("token") == std::optional<std::string>("a b"));
  CHECK(r.query_param("x") == std::optional<std::string>("1"));
  CHECK_FALSE(r.query_param("y"));
  CHECK(r.header("content-length") == "5");
  CHECK(r.header("x-a") == "b");
  HttpRequest bad;
  CHECK(parse_http_head("GARBAGE", bad));
  CHECK(parse_http_head("GET / HTTP/2.0", bad));
  CHECK(parse_http_head("GET nopath HTTP/1.1", bad));
  CHECK(parse_http_head("get / HTTP/1.1", bad));
  CHECK(parse_http_head("GET / HTTP/1.1\r\nno colon here", bad));
}

// Found by tests/fuzz/fuzz_http_request: the protocol was quoted as sent, and the 400 answer's
// JSON dump threw on bytes that are not UTF-8, which stopped the server's thread.
TEST_CASE("an HTTP head's unreadable protocol is refused without quoting it", "[ps][http]") {
  HttpRequest r;
  const auto err = parse_http_head("GET /metrics HTTP\xcc.u\n01", r);
  REQUIRE(err);
  CHECK(*err == "unsupported protocol (expected HTTP/1.1 or HTTP/1.0)");
  CHECK_NOTHROW(HttpResponse::error(400, *err).body);
  CHECK(parse_http_head("GET / HTTP/2.0", r) ==
        std::optional<std::string>("unsupported protocol 'HTTP/2.0'"));
}

TEST_CASE("an HTTP server answers, refuses bad requests with a reason, and keeps serving",
          "[ps][http]") {
  HttpOptions o;
  o.address = "127.0.0.1:0";
  o.max_header_bytes = 1024;
  o.max_body_bytes = 100;
  HttpServer server(o, echo());
  server.start();
  const auto port = server.port();
  REQUIRE(port != 0);
  CHECK(server.url() == "http://127.0.0.1:" + std::to_string(port) + "/");

  std::string r = round_trip(port, "POST /p?x=7 HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello");
  REQUIRE(status_of(r) == 200);
  const json j = json::parse(body_of(r));
  CHECK(j["method"] == "POST");
  CHECK(j["path"] == "/p");
  CHECK(j["x"] == "7");
  CHECK(j["body"] == "hello");
  CHECK(r.find("Connection: close") != std::string::npos);

  CHECK(status_of(round_trip(port, "GARBAGE\r\n\r\n")) == 400);
  CHECK(body_of(round_trip(port, "GARBAGE\r\n\r\n")).find("malformed request line") !=
        std::string::npos);
  CHECK(status_of(round_trip(port, "GET / HTTP/1.1\r\nContent-Length: lots\r\n\r\n")) == 400);
  CHECK(status_of(round_trip(
            port, "GET / HTTP/1.1\r\nX: " + std::string(2000, 'a') + "\r\n\r\n")) == 431);
  CHECK(status_of(round_trip(port, "POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n" +
                                       std::string(101, 'b'))) == 413);
  CHECK(status_of(round_trip(port, "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n")) ==
        411);
  CHECK(status_of(round_trip(port, std::string("\0\1\2\3\r\n\r\n", 8))) == 400);
  // A client that goes away mid-request costs nothing.
  round_trip(port, "POST / HTTP/1.1\r\nContent-Length: 50\r\n\r\nshort");
  CHECK(status_of(round_trip(port, "GET /still HTTP/1.1\r\n\r\n")) == 200);
}

TEST_CASE("an HTTP server beyond loopback needs a token, and checks it on every request",
          "[ps][http]") {
  HttpOptions o;
  o.address = "0.0.0.0:0";
  CHECK_THROWS_WITH(HttpServer(o, echo()), Catch::Contains("give a token"));
  o.token = "s3cret";
  HttpServer server(o, echo());
  server.start();
  const auto port = server.port();
  CHECK(status_of(round_trip(port, "GET / HTTP/1.1\r\n\r\n")) == 401);
  CHECK(status_of(round_trip(port, "GET / HTTP/1.1\r\nAuthorization: Bearer wrong\r\n\r\n")) ==
        401);
  CHECK(status_of(round_trip(port, "GET /?token=s3cre HTTP/1.1\r\n\r\n")) == 401);
  CHECK(status_of(round_trip(port, "GET / HTTP/1.1\r\nAuthorization: Bearer s3cret\r\n\r\n")) ==
        200);
  const std::string by_query = round_trip(port, "GET /?token=s3cret HTTP/1.1\r\n\r\n");
  CHECK(status_of(by_query) == 200);
  CHECK(by_query.find("Set-Cookie: psbed_token=s3cret;") != std::string::npos);
  CHECK(status_of(round_trip(
            port, "GET /x.js HTTP/1.1\r\nCookie: a=b; psbed_token=s3cret\r\n\r\n")) == 200);
  CHECK(status_of(round_trip(port, "GET /x.js HTTP/1.1\r\nCookie: psbed_token=nope\r\n\r\n")) ==
        401);
}

// A probe (kubelet's httpGet, a compose healthcheck) carries no token: only the paths named
// open are answered without one, and exactly those.
TEST_CASE("open paths are answered without the token, every other path needs it", "[ps][http]") {
  HttpOptions o;
  o.address = "0.0.0.0:0";
  o.token = "s3cret";
  o.open_paths = {"/healthz"};
  HttpServer server(o, echo());
  server.start();
  const auto port = server.port();
  CHECK(status_of(round_trip(port, "GET /healthz HTTP/1.1\r\n\r\n")) == 200);
  CHECK(status_of(round_trip(port, "GET /healthz?x=1 HTTP/1.1\r\n\r\n")) == 200);
  CHECK(status_of(round_trip(port, "GET /healthz/ HTTP/1.1\r\n\r\n")) == 401);
  CHECK(status_of(round_trip(port, "GET /healthzz HTTP/1.1\r\n\r\n")) == 401);
  CHECK(status_of(round_trip(port, "GET /metrics HTTP/1.1\r\n\r\n")) == 401);
}

// A DNS-rebinding page reaches a loopback port under a name of its own; a foreign page names
// its origin. Both are refused with 403 and why, and the server goes on serving.
TEST_CASE("a loopback HTTP server answers to loopback names on its port, and its own pages only",
          "[ps][http]") {
  HttpOptions o;
  o.address = "127.0.0.1:0";
  HttpServer server(o, echo());
  server.start();
  const auto port = server.port();
  const std::string p = std::to_string(port);
  auto get = [&](const std::string& headers) {
    return round_trip(port, "GET /api/status HTTP/1.1\r\n" + headers + "\r\n");
  };
  for (const std::string& host :
       {"127.0.0.1:" + p, "localhost:" + p, "[::1]:" + p, "LOCALHOST:" + p}) {
    INFO(host);
    CHECK(status_of(get("Host: " + host + "\r\n")) == 200);
  }
  CHECK(status_of(get("")) == 200);  // no Host: no browser sent it
  const std::string rebound =
      get("Host: evil.example:" + p + "\r\nOrigin: http://evil.example:" + p + "\r\n");
  CHECK(status_of(rebound) == 403);
  CHECK(body_of(rebound).find("Host 'evil.example:" + p + "'") != std::string::npos);
  CHECK(status_of(get("Host: evil.example:" + p + "\r\n")) == 403);
  CHECK(status_of(get("Host: localhost:1\r\n")) == 403);
  CHECK(status_of(get("Host: localhost\r\n")) == 403);  // port 80, not this one
  CHECK(status_of(get("Host: localhost.evil.example:" + p + "\r\n")) == 403);
  const std::string cross = get("Host: 127.0.0.1:" + p + "\r\nOrigin: https://evil.example\r\n");
  CHECK(status_of(cross) == 403);
  CHECK(body_of(cross).find("https://evil.example") != std::string::npos);
  CHECK(status_of(get("Host: 127.0.0.1:" + p + "\r\nOrigin: null\r\n")) == 403);
  CHECK(status_of(get("Host: 127.0.0.1:" + p + "\r\nOrigin: http://127.0.0.1:" + p + "\r\n")) ==
        200);
  CHECK(status_of(get("Host: localhost:" + p + "\r\n")) == 200);
}

TEST_CASE("beyond loopback any Host passes (the token guards it), a foreign Origin does not",
          "[ps][http]") {
  HttpRequest r;
  r.headers["host"] = "psbed.lab.example:8080";
  CHECK_FALSE(check_http_host(r, "0.0.0.0", 8080));
  r.headers["origin"] = "http://psbed.lab.example:8080";
  CHECK_FALSE(check_http_host(r, "0.0.0.0", 8080));
  r.headers["origin"] = "http://evil.example";
  CHECK(check_http_host(r, "0.0.0.0", 8080));
  CHECK(check_http_host(r, "0.0.0.0", 8080)->find("http://evil.example") != std::string::npos);
}

// An answer quoting what a client sent that is not UTF-8 (a policy name of bytes) is an answer,
// not an exception from the JSON writer (which turned a 400 into a 500).
TEST_CASE("an answer quoting bytes that are not UTF-8 is written, not thrown", "[ps][http]") {
  const HttpResponse r = HttpResponse::error(400, std::string("unknown policy '\xff\xfe'"));
  CHECK(r.status == 400);
  CHECK(json::parse(r.body)["error"].get<std::string>().find("unknown policy") == 0);
}

TEST_CASE("an HTTP answer may come later from another thread, or after the server stopped",
          "[ps][http]") {
  // The handler runs on the server's thread: what it hands over is guarded.
  std::mutex mu;
  std::condition_variable cv;
  HttpRespond kept;
  std::thread later;
  HttpOptions o;
  o.address = "127.0.0.1:0";
  {
    HttpServer server(o, [&](const HttpRequest& req, HttpRespond respond) {
      std::lock_guard<std::mutex> lock(mu);
      if (req.path == "/late") {
        later = std::thread([respond] {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          respond(HttpResponse::json(200, {{"late", true}}));
          respond(HttpResponse::json(500, {{"twice", true}}));  // only the first answer counts
        });
      } else {
        kept = respond;  // never answered while the server runs
        cv.notify_all();
      }
    });
    server.start();
    const std::string r = round_trip(server.port(), "GET /late HTTP/1.1\r\n\r\n");
    CHECK(status_of(r) == 200);
    CHECK(body_of(r).find("late") != std::string::npos);
    {
      std::lock_guard<std::mutex> lock(mu);
      later.join();
    }
    // Ask for /kept and stop the server before it is answered.
    std::string unanswered = "none yet";
    std::thread client([port = server.port(), &unanswered] {
      unanswered = round_trip(port, "GET /kept HTTP/1.1\r\n\r\n");
    });
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return bool(kept); });
    }
    const auto t0 = std::chrono::steady_clock::now();
    server.stop();
    client.join();
    // stop() closed the connection: the client saw the end at once, with no answer.
    CHECK(unanswered.empty());
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));
  }
  kept(HttpResponse::json(200, {}));  // after the server is gone: dropped, no crash
  kept = nullptr;
}

TEST_CASE("the control routes: status codes, bodies parsed once, dashboard files", "[ps][http]") {
  ControlPlaneApi api;
  api.status = [] { return json{{"ok", true}}; };
  api.metrics = [] { return std::string("m 1\n"); };
  json seen;
  api.switch_policy = [&](const json& req, std::function<void(int, json)> done) {
    seen = req;
    done(200, {{"step", 12}});
  };
  api.prediction = [](HttpRespond r) { r(HttpResponse::error(404, "no profile")); };
  api.history = [] { return json{{"samples", json::array()}}; };
  const HttpHandler h = make_control_handler(api);
  auto call = [&](const std::string& method, const std::string& path, const std::string& body = "",
                  const std::string& origin = "") {
    HttpRequest r;
    r.method = method, r.path = path, r.body = body;
    r.headers["host"] = "127.0.0.1:8080";
    if (!origin.empty()) r.headers["origin"] = origin;
    HttpResponse out;
    h(r, [&](HttpResponse x) { out = std::move(x); });
    return out;
  };
  CHECK(call("GET", "/api/status").status == 200);
  CHECK(call("POST", "/api/status").status == 405);
  const HttpResponse healthz = call("GET", "/healthz");
  CHECK(healthz.status == 200);
  CHECK(healthz.body == "ok\n");
  CHECK(call("POST", "/healthz").status == 405);
  const HttpResponse m = call("GET", "/metrics");
  CHECK(m.content_type.rfind("text/plain; version=0.0.4", 0) == 0);
  CHECK(call("GET", "/api/policy").status == 405);
  CHECK(call("POST", "/api/policy", "{").status == 400);
  CHECK(call("POST", "/api/policy", "\"p3\"").status == 400);
  const HttpResponse sw = call("POST", "/api/policy", R"({"policy":"p3"})");
  CHECK(sw.status == 200);
  CHECK(seen["policy"] == "p3");
  CHECK(json::parse(sw.body)["step"] == 12);
  // The dashboard's own page may switch; another site open in the same browser may not.
  CHECK(call("POST", "/api/policy", R"({"policy":"p3"})", "http://127.0.0.1:8080").status == 200);
  seen = nullptr;
  CHECK(call("POST", "/api/policy", R"({"policy":"p3"})", "https://evil.example").status == 403);
  CHECK(seen.is_null());
  CHECK(call("GET", "/api/prediction").status == 404);
  CHECK(json::parse(call("GET", "/api/history").body)["samples"].is_array());
  const HttpResponse page = call("GET", "/");
  CHECK(page.status == 200);
  CHECK(page.content_type.rfind("text/html", 0) == 0);
  CHECK(page.body.find("dashboard.js") != std::string::npos);
  CHECK(call("GET", "/dashboard.js").status == 200);
  CHECK(call("GET", "/nowhere").status == 404);
}

TEST_CASE("Prometheus text: families, escaped labels, cumulative histograms", "[ps][http]") {
  MetricsText m;
  m.family("psbed_x_total", "counter", "Things");
  m.sample("psbed_x_total", {{"node", "a\"b\\c\nd"}}, 3);
  m.family("psbed_t_seconds", "histogram", "Times");
  m.histogram("psbed_t_seconds", {{"node", "w"}}, {0.1, 1}, {2, 0, 1}, 5.5);
  const std::string t = m.str();
  CHECK(t.find("# TYPE psbed_x_total counter\n") != std::string::npos);
  CHECK(t.find("psbed_x_total{node=\"a\\\"b\\\\c\\nd\"} 3\n") != std::string::npos);
  CHECK(t.find("psbed_t_seconds_bucket{node=\"w\",le=\"0.1\"} 2\n") != std::string::npos);
  CHECK(t.find("psbed_t_seconds_bucket{node=\"w\",le=\"1\"} 2\n") != std::string::npos);
  CHECK(t.find("psbed_t_seconds_bucket{node=\"w\",le=\"+Inf\"} 3\n") != std::string::npos);
  CHECK(t.find("psbed_t_seconds_sum{node=\"w\"} 5.5\n") != std::string::npos);
  CHECK(t.find("psbed_t_seconds_count{node=\"w\"} 3\n") != std::string::npos);
  CHECK(metric_number(0.0025) == "0.0025");
}

TEST_CASE("process metrics and build info, as Prometheus client libraries name them",
          "[ps][http]") {
  MetricsText m;
  append_build_info(m);
  append_process_metrics(m);
  const std::string t = m.str();
  CHECK(t.find("# TYPE psbed_build_info gauge\npsbed_build_info{version=\"") != std::string::npos);
  auto value = [&](const std::string& name) {
    const auto at = t.find("\n" + name + " ");
    REQUIRE(at != std::string::npos);
    return std::stod(t.substr(at + name.size() + 2));
  };
  CHECK(t.find("# TYPE process_cpu_seconds_total counter\n") != std::string::npos);
  CHECK(value("process_cpu_seconds_total") >= 0);
  // This test process holds at least a few MB and some open files, and began before now.
  CHECK(value("process_resident_memory_bytes") > 1e6);
  CHECK(value("process_virtual_memory_bytes") >= value("process_resident_memory_bytes"));
  CHECK(value("process_open_fds") >= 3);
  const double now_s = double(std::chrono::duration_cast<std::chrono::seconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count());
  // The start time is /proc/stat's btime (whole seconds, from a boot clock that drifts from the
  // wall clock on a VM) plus the start tick: a few seconds of slack, not one.
  CHECK(value("process_start_time_seconds") <= now_s + 5);
  CHECK(value("process_start_time_seconds") > now_s - 86400 * 30);
}
