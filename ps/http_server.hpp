// A small HTTP/1.1 server on standalone Asio, for the coordinator's live control plane and
// dashboard. One thread (named "http") runs every connection; a request is read whole (head,
// then a body of Content-Length bytes) within bounds, handed to one handler, and answered once,
// with "Connection: close". The handler may answer later, from any thread (a policy switch
// answers when the workers have switched), so it gets a `respond` callback, not a return value.
//
// Bad input never stops the server: a malformed request line or header gets 400, a head over
// max_header_bytes 431, a body over max_body_bytes 413, a foreign Host or Origin 403
// (check_http_host), a missing or wrong token 401; the connection is closed and the server goes
// on accepting.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace psbed::ps {

struct HttpRequest {
  std::string method, target;                  // target as sent: "/api/status?token=x"
  std::string path, query;                     // split at '?', path percent-decoded
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  // The value of `name` in the query string (percent-decoded), or nullopt.
  std::optional<std::string> query_param(std::string_view name) const;
  std::string header(const std::string& lower_name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra ones
  static HttpResponse json(int status, const nlohmann::json& j);
  // {"error": message}: every refusal says why in one line.
  static HttpResponse error(int status, const std::string& message);
};

using HttpRespond = std::function<void(HttpResponse)>;
using HttpHandler = std::function<void(const HttpRequest&, HttpRespond)>;

struct HttpOptions {
  std::string address = "127.0.0.1:8080";  // HOST:PORT, :PORT or PORT (loopback); port 0 = any
  // Required when the address is not loopback (and checked whenever given): every request must
  // carry it as "Authorization: Bearer TOKEN", "?token=TOKEN" or the cookie psbed_token, which
  // an answer to a request with ?token= sets (so a page's scripts load too).
  std::string token;
  // Paths answered without the token (a liveness probe carries none); their answers must tell
  // nothing of the run.
  std::vector<std::string> open_paths;
  std::size_t max_header_bytes = 16 << 10;
  std::size_t max_body_bytes = 1 << 20;
  double read_timeout_s = 10;  // a client that sends its request slower than this is dropped
  int max_connections = 64;    // further ones get 503 at once
};

struct HttpAddress {
  std::string host;
  std::uint16_t port = 0;
  bool loopback() const;
};
// "127.0.0.1:8080", "[::1]:80", "localhost:0", ":8080" and "8080" (the last two: 127.0.0.1).
// Throws psbed::Error naming the address and what was expected.
HttpAddress parse_http_address(const std::string& text);

// Parses a request head (request line and headers, without the final blank line) into `req`.
// Returns an error message for a malformed head.
std::optional<std::string> parse_http_head(std::string_view head, HttpRequest& req);

// Why a request may not reach a server bound to bound_host:bound_port, or nullopt if it may.
// An Origin (a browser names the page that sends a request) must be the server itself as the
// request's Host names it. On a loopback address the Host must be localhost, 127.0.0.1, [::1]
// or the bound name, with the bound port (a DNS-rebinding page sends its own name); a request
// without a Host came from no browser and passes. Beyond loopback any Host passes: the token,
// which a foreign page does not have, guards it.
std::optional<std::string> check_http_host(const HttpRequest& req, const std::string& bound_host,
                                           std::uint16_t bound_port);

std::string http_status_text(int status);

class HttpServer {
 public:
  // Binds at once (throws psbed::Error: a bad address, a port in use, a non-loopback address
  // without a token); serves from start() on.
  HttpServer(HttpOptions opt, HttpHandler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  void start();
  // Stops accepting and drops open connections; answers given after this are discarded.
  void stop();
  std::uint16_t port() const;
  std::string url() const;  // http://HOST:PORT/ as bound (the real port when 0 was asked)

  struct Core;  // the io_context and what connections share; outlives late answers

 private:
  std::shared_ptr<Core> core_;
};

}  // namespace psbed::ps
