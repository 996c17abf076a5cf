#include "ps/http_server.hpp"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <asio.hpp>
#include <atomic>
#include <cctype>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "core/secret.hpp"

namespace psbed::ps {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return std::string(s);
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decoding; '+' is a space only in query strings. A malformed escape stays as is.
std::string decode(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex_value(s[i + 1]) >= 0 && hex_value(s[i + 2]) >= 0) {
      out += char(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
      i += 2;
    } else if (s[i] == '+' && plus_is_space) {
      out += ' ';
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

std::optional<std::string> check_http_host(const HttpRequest& req, const std::string& bound_host,
                                           std::uint16_t bound_port) {
  const HttpAddress bound{bound_host, bound_port};
  const std::string host = lower(req.header("host"));
  const std::string origin = lower(req.header("origin"));
  // A foreign page's request names the page's origin: only one of this server's own pages (the
  // dashboard, as the browser reached it) may drive it.
  if (!origin.empty() && origin != "http://" + host)
    return "a request from the page at " + origin + " (this server serves only its own pages)";
  if (!bound.loopback() || host.empty()) return std::nullopt;  // no Host: no browser sent it
  // A DNS-rebinding page reaches a loopback port under a name of its own, and the browser sends
  // that name: a loopback server answers to loopback names only, on its own port.
  std::string name = host, port;
  if (!name.empty() && name.front() == '[') {
    const auto close = name.find(']');
    port = close == std::string::npos ? "" : name.substr(close + 1);
    name = close == std::string::npos ? name : name.substr(1, close - 1);
    if (!port.empty() && port.front() == ':') port.erase(0, 1);
  } else if (const auto colon = name.rfind(':'); colon != std::string::npos) {
    port = name.substr(colon + 1);
    name = name.substr(0, colon);
  }
  const bool loopback_name =
      name == "localhost" || name == "127.0.0.1" || name == "::1" || name == lower(bound_host);
  const bool same_port = port.empty() ? bound_port == 80 : port == std::to_string(bound_port);
  if (loopback_name && same_port) return std::nullopt;
  return "Host '" + req.header("host") + "' (this server is bound to loopback: it answers to " +
         "localhost, 127.0.0.1 or [::1] on port " + std::to_string(bound_port) + ")";
}

std::optional<std::string> HttpRequest::query_param(std::string_view name) const {
  std::string_view q = query;
  while (!q.empty()) {
    const auto amp = q.find('&');
    std::string_view pair = q.substr(0, amp);
    const auto eq = pair.find('=');
    if (decode(pair.substr(0, eq), true) == name)
      return eq == std::string_view::npos ? std::string() : decode(pair.substr(eq + 1), true);
    if (amp == std::string_view::npos) break;
    q.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

std::string HttpRequest::header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? std::string() : it->second;
}

HttpResponse HttpResponse::json(int status, const nlohmann::json& j) {
  HttpResponse r;
  r.status = status;
  // Replaced, not thrown on: an answer may quote text a client sent, which need not be UTF-8.
  r.body = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  return r;
}

HttpResponse HttpResponse::error(int status, const std::string& message) {
  return json(status, {{"ok", false}, {"error", message}});  // as a refused switch answers
}

bool HttpAddress::loopback() const {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

HttpAddress parse_http_address(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return Error("bad HTTP address '" + text + "': " + why +
                 " (expected HOST:PORT, :PORT or PORT)");
  };
  HttpAddress a;
  std::string port;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      throw bad("unclosed [");
    a.host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else if (const auto colon = text.rfind(':'); colon != std::string::npos) {
    a.host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (a.host.find(':') != std::string::npos) throw bad("write an IPv6 host in brackets");
  } else {
    port = text;
  }
  if (a.host.empty()) a.host = "127.0.0.1";
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string::npos || std::stoul(port) > 65535)
    throw bad("the port must be a number from 0 to 65535");
  a.port = std::uint16_t(std::stoul(port));
  return a;
}

std::optional<std::string> parse_http_head(std::string_view head, HttpRequest& req) {
  const auto eol = head.find("\r\n");
  const std::string_view line = head.substr(0, eol);
  const auto sp1 = line.find(' ');
  const auto sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
    return "malformed request line (expected METHOD TARGET HTTP/1.x)";
  req.method = std::string(line.substr(0, sp1));
  req.target = std::string(line.substr(sp1 + 1, sp2 - sp1 - 1));
  const std::string_view version = line.substr(sp2 + 1);
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    // Quoted only when it is printable ASCII: the reason goes into a JSON answer, whose dump
    // throws on bytes that are not UTF-8 (and that would stop the server's thread).
    const bool printable = std::all_of(version.begin(), version.end(),
                                       [](unsigned char c) { return c >= 0x20 && c < 0x7f; });
    return printable ? "unsupported protocol '" + std::string(version) + "'"
                     : std::string("unsupported protocol (expected HTTP/1.1 or HTTP/1.0)");
  }
  if (req.method.empty() ||
      req.method.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ") != std::string::npos)
    return "malformed method";
  if (req.target.empty() || req.target.front() != '/')
    return "the target must be a path starting with '/'";
  const auto q = req.target.find('?');
  req.path = decode(std::string_view(req.target).substr(0, q), false);
  req.query = q == std::string::npos ? "" : req.target.substr(q + 1);
  std::string_view rest = eol == std::string_view::npos ? std::string_view() : head.substr(eol + 2);
  while (!rest.empty()) {
    const auto end = rest.find("\r\n");
    const std::string_view h = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 2);
    if (h.empty()) continue;
    const auto colon = h.find(':');
    if (colon == std::string_view::npos || colon == 0) return "malformed header line";
    std::string name = lower(std::string(h.substr(0, colon)));
    if (name.find_first_of(" \t") != std::string::npos) return "malformed header name";
    req.headers[name] = trim(h.substr(colon + 1));
  }
  return std::nullopt;
}

std::string http_status_text(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 411:
      return "Length Required";
    case 413:
      return "Payload Too Large";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "Status";
  }
}

// Shared by the server and every connection, so an answer that comes after stop() (or after the
// server is gone) finds a live io_context and is dropped there instead of touching freed memory.
// Members are destroyed bottom up: the io_context (and with it the connections its queued
// handlers hold, which read `opt` and count down `connections`) before what they use.
namespace {
class Connection;
}

struct HttpServer::Core {
  HttpOptions opt;
  HttpHandler handler;
  std::atomic<int> connections{0};
  std::atomic<bool> stopped{false};
  std::string host;
  std::uint16_t port = 0;  // as bound (the real one when 0 was asked)
  std::weak_ptr<Core> self;
  // Touched on the server's thread only: stop() closes what is still open there.
  std::vector<std::weak_ptr<Connection>> open;
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor{io};
  std::thread thread;
};

namespace {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  // Pending operations hold a connection, never the Core: the io_context's handlers must not keep
  // the io_context alive. Only an answer in the making (Respond) holds both.
  Connection(asio::ip::tcp::socket socket, HttpServer::Core& core)
      : socket_(std::move(socket)),
        timer_(socket_.get_executor()),
        buf_(core.opt.max_header_bytes),
        core_(core),
        opt_(core.opt) {
    ++core_.connections;
  }
  ~Connection() { --core_.connections; }

  // Ends the exchange without an answer (the server is stopping).
  void abort() {
    answered_ = true;
    close();
  }

  void start(bool over_capacity) {
    if (over_capacity)
      return send(HttpResponse::error(503, "too many open connections; try again"));
    timer_.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(opt_.read_timeout_s)));
    timer_.async_wait([self = shared_from_this()](const asio::error_code& ec) {
      if (ec || self->answered_) return;
      // The read still pending is aborted first: the lingering close reads the socket next.
      asio::error_code ignored;
      self->socket_.cancel(ignored);
      self->send(HttpResponse::error(408, "the request did not arrive in time"));
    });
    asio::async_read_until(socket_, buf_, "\r\n\r\n",
                           [self = shared_from_this()](const asio::error_code& ec, std::size_t n) {
                             self->on_head(ec, n);
                           });
  }

 private:
  void on_head(const asio::error_code& ec, std::size_t n) {
    if (answered_) return;
    if (ec == asio::error::not_found)
      return send(HttpResponse::error(
          431, "request head larger than " + std::to_string(opt_.max_header_bytes) + " bytes"));
    if (ec) return close();
    const std::string head(asio::buffers_begin(buf_.data()),
                           asio::buffers_begin(buf_.data()) + std::ptrdiff_t(n - 4));
    buf_.consume(n);
    if (auto err = parse_http_head(head, req_)) return send(HttpResponse::error(400, *err));
    if (!req_.header("transfer-encoding").empty())
      return send(HttpResponse::error(411, "chunked bodies are not accepted; send Content-Length"));
    std::size_t length = 0;
    if (const std::string cl = req_.header("content-length"); !cl.empty()) {
      if (cl.size() > 18 || cl.find_first_not_of("0123456789") != std::string::npos)
        return send(HttpResponse::error(400, "malformed Content-Length '" + cl + "'"));
      length = std::stoull(cl);
    }
    if (length > opt_.max_body_bytes)
      return send(
          HttpResponse::error(413, "body of " + std::to_string(length) + " bytes; at most " +
                                       std::to_string(opt_.max_body_bytes) + " are accepted"));
    req_.body.assign(
        asio::buffers_begin(buf_.data()),
        asio::buffers_begin(buf_.data()) + std::ptrdiff_t(std::min(length, buf_.size())));
    const std::size_t have = req_.body.size();
    if (have == length) return dispatch();
    req_.body.resize(length);
    asio::async_read(socket_, asio::buffer(&req_.body[have], length - have),
                     [self = shared_from_this()](const asio::error_code& ec, std::size_t) {
                       if (self->answered_) return;
                       if (ec) return self->close();
                       self->dispatch();
                     });
  }

  void dispatch() {
    timer_.cancel();
    if (auto refused = check_http_host(req_, core_.host, core_.port))
      return send(HttpResponse::error(403, "refused " + *refused));
    const bool open = std::find(opt_.open_paths.begin(), opt_.open_paths.end(), req_.path) !=
                      opt_.open_paths.end();
    if (!opt_.token.empty() && !open) {
      const std::string auth = req_.header("authorization");
      const std::string bearer =
          auth.rfind("Bearer ", 0) == 0 ? trim(auth.substr(7)) : std::string();
      const auto query_token = req_.query_param("token");
      const bool by_query = query_token && same_secret(*query_token, opt_.token);
      // A page opened as /?token=... loads its scripts and styles without the query: the
      // answer to that first request leaves the token in a cookie those requests carry.
      set_cookie_ = by_query;
      if (!same_secret(bearer, opt_.token) && !by_query &&
          !same_secret(cookie("psbed_token"), opt_.token)) {
        HttpResponse r = HttpResponse::error(
            401, "a token is required: send 'Authorization: Bearer TOKEN' or ?token=TOKEN");
        r.headers.emplace_back("WWW-Authenticate", "Bearer");
        return send(std::move(r));
      }
    }
    // The handler may answer from another thread: the answer is posted back to this one.
    auto state = std::make_shared<Respond>(core_.self.lock(), shared_from_this());
    HttpRespond respond = [state](HttpResponse r) {
      if (state->once.exchange(true) || !state->core || state->core->stopped) return;
      asio::post(state->core->io,
                 [self = state->conn, r = std::move(r)]() mutable { self->send(std::move(r)); });
    };
    try {
      core_.handler(req_, respond);
    } catch (const std::exception& e) {
      respond(HttpResponse::error(500, e.what()));
    }
  }

  void send(HttpResponse r) {
    if (answered_) return;
    answered_ = true;
    timer_.cancel();
    out_ = "HTTP/1.1 " + std::to_string(r.status) + " " + http_status_text(r.status) + "\r\n";
    out_ += "Content-Type: " + r.content_type + "\r\n";
    out_ += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
    out_ += "Cache-Control: no-store\r\nConnection: close\r\n";
    for (const auto& [k, v] : r.headers) out_ += k + ": " + v + "\r\n";
    if (set_cookie_)
      out_ += "Set-Cookie: psbed_token=" + opt_.token + "; Path=/; HttpOnly; SameSite=Strict\r\n";
    out_ += "\r\n";
    if (req_.method != "HEAD") out_ += r.body;
    asio::async_write(socket_, asio::buffer(out_),
                      [self = shared_from_this()](const asio::error_code& ec, std::size_t) {
                        if (ec) return self->close();
                        self->linger();
                      });
  }

  // Closing a socket with unread request bytes in it sends a reset, which may destroy the
  // answer before the client reads it (a 413 to a large body, a 431 to a long head). So: stop
  // sending, read and discard what still comes for a moment, then close.
  void linger() {
    asio::error_code ignored;
    socket_.shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
    timer_.expires_after(std::chrono::seconds(2));
    timer_.async_wait([self = shared_from_this()](const asio::error_code& ec) {
      if (!ec) self->close();
    });
    drain();
  }

  void drain() {
    socket_.async_read_some(asio::buffer(scratch_),
                            [self = shared_from_this()](const asio::error_code& ec, std::size_t) {
                              if (ec) return self->close();
                              self->drain();
                            });
  }

  std::string cookie(const std::string& name) const {
    std::string_view c = req_.headers.count("cookie") ? std::string_view(req_.headers.at("cookie"))
                                                      : std::string_view();
    while (!c.empty()) {
      const auto semi = c.find(';');
      std::string pair = trim(c.substr(0, semi));
      if (pair.rfind(name + "=", 0) == 0) return pair.substr(name.size() + 1);
      if (semi == std::string_view::npos) break;
      c.remove_prefix(semi + 1);
    }
    return {};
  }

  void close() {
    timer_.cancel();
    asio::error_code ignored;
    socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  // Keeps the io_context alive for as long as a handler may still answer, and lets go of the
  // connection (whose socket belongs to that io_context) first.
  struct Respond {
    Respond(std::shared_ptr<HttpServer::Core> c, std::shared_ptr<Connection> s)
        : core(std::move(c)), conn(std::move(s)) {}
    ~Respond() { conn.reset(); }
    std::shared_ptr<HttpServer::Core> core;
    std::shared_ptr<Connection> conn;
    std::atomic<bool> once{false};
  };

  asio::ip::tcp::socket socket_;
  asio::steady_timer timer_;
  asio::streambuf buf_;
  HttpServer::Core& core_;
  const HttpOptions& opt_;
  HttpRequest req_;
  std::string out_;
  bool answered_ = false;
  bool set_cookie_ = false;
  std::array<char, 4096> scratch_;
};

void accept_next(const std::shared_ptr<HttpServer::Core>& core) {
  std::weak_ptr<HttpServer::Core> weak = core;
  core->acceptor.async_accept([weak](const asio::error_code& ec, asio::ip::tcp::socket socket) {
    auto core = weak.lock();
    if (!core || core->stopped) return;
    if (!ec) {
      const bool over = core->connections.load() >= core->opt.max_connections;
      auto c = std::make_shared<Connection>(std::move(socket), *core);
      auto& open = core->open;
      open.erase(
          std::remove_if(open.begin(), open.end(), [](const auto& w) { return w.expired(); }),
          open.end());
      open.push_back(c);
      c->start(over);
    } else if (ec == asio::error::operation_aborted) {
      return;
    }
    // Other accept errors (out of descriptors, a reset before accept) are transient: go on.
    accept_next(core);
  });
}
}  // namespace

HttpServer::HttpServer(HttpOptions opt, HttpHandler handler) : core_(std::make_shared<Core>()) {
  core_->self = core_;
  const HttpAddress a = parse_http_address(opt.address);
  if (!a.loopback() && opt.token.empty())
    throw Error("HTTP on " + opt.address +
                " is reachable beyond this host: give a token (--http-token) or bind 127.0.0.1");
  core_->opt = std::move(opt);
  core_->handler = std::move(handler);
  core_->host = a.host;
  asio::error_code ec;
  asio::ip::tcp::resolver resolver(core_->io);
  auto results =
      resolver.resolve(a.host, std::to_string(a.port), asio::ip::resolver_base::passive, ec);
  if (ec || results.empty())
    throw Error("cannot resolve HTTP address '" + core_->opt.address + "': " + ec.message());
  const asio::ip::tcp::endpoint ep = *results.begin();
  auto& acc = core_->acceptor;
  acc.open(ep.protocol(), ec);
  if (!ec) acc.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acc.bind(ep, ec);
  if (!ec) acc.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw Error("cannot listen for HTTP on " + core_->opt.address + ": " + ec.message());
  core_->port = acc.local_endpoint(ec).port();
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::start() {
  accept_next(core_);
  // A plain pointer: the thread must never hold the last reference (it would destroy its own
  // std::thread); stop() joins it before core_ can go.
  core_->thread = std::thread([core = core_.get()] {
    pthread_setname_np(pthread_self(), "http");
    try {
      core->io.run();
    } catch (const std::exception& e) {
      spdlog::error("HTTP server stopped: {}", e.what());
    }
  });
}

void HttpServer::stop() {
  if (core_->stopped.exchange(true)) return;
  // Close the acceptor and every open connection on the server's thread (which owns them), so
  // a client waiting for an answer that will not come sees the end at once.
  std::promise<void> closed;
  asio::post(core_->io, [core = core_.get(), &closed] {
    asio::error_code ignored;
    core->acceptor.close(ignored);
    for (auto& w : core->open)
      if (auto c = w.lock()) c->abort();
    closed.set_value();
  });
  if (core_->thread.joinable()) closed.get_future().wait_for(std::chrono::seconds(2));
  core_->io.stop();
  if (core_->thread.joinable()) core_->thread.join();
}

std::uint16_t HttpServer::port() const {
  asio::error_code ec;
  return core_->acceptor.local_endpoint(ec).port();
}

std::string HttpServer::url() const {
  const std::string host =
      core_->host.find(':') != std::string::npos ? "[" + core_->host + "]" : core_->host;
  return "http://" + host + ":" + std::to_string(port()) + "/";
}

}  // namespace psbed::ps
