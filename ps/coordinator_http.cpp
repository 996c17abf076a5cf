#include "ps/coordinator_http.hpp"

#include "core/json_text.hpp"
#include "ps/dashboard_assets.hpp"

namespace psbed::ps {

using json = nlohmann::json;

namespace {

HttpResponse asset(const DashboardAsset& a) {
  HttpResponse r;
  r.content_type = std::string(a.content_type);
  r.body = std::string(a.body);
  return r;
}

HttpResponse method_not_allowed(const std::string& allowed) {
  HttpResponse r = HttpResponse::error(405, "use " + allowed + " here");
  r.headers.emplace_back("Allow", allowed);
  return r;
}

}  // namespace

HttpHandler make_control_handler(ControlPlaneApi api) {
  return [api = std::move(api)](const HttpRequest& req, HttpRespond respond) {
    const bool get = req.method == "GET" || req.method == "HEAD";
    if (req.path == "/api/status") {
      if (!get) return respond(method_not_allowed("GET"));
      return respond(HttpResponse::json(200, api.status()));
    }
    if (req.path == "/api/history") {
      if (!get) return respond(method_not_allowed("GET"));
      return respond(HttpResponse::json(200, api.history()));
    }
    if (req.path == "/healthz") {
      if (!get) return respond(method_not_allowed("GET"));
      return respond(HttpResponse{200, "text/plain; charset=utf-8", "ok\n", {}});
    }
    if (req.path == "/metrics") {
      if (!get) return respond(method_not_allowed("GET"));
      HttpResponse r;
      r.content_type = "text/plain; version=0.0.4; charset=utf-8";
      r.body = api.metrics();
      return respond(std::move(r));
    }
    if (req.path == "/api/policy") {
      if (req.method != "POST") return respond(method_not_allowed("POST"));
      // Any web page the user has open may POST to a loopback port (a plain-text body needs no
      // preflight); browsers name the page's origin, so a switch from a foreign one is refused.
      if (const std::string origin = req.header("origin");
          !origin.empty() && origin != "http://" + req.header("host"))
        return respond(
            HttpResponse::error(403, "cross-origin request from " + origin + " refused"));
      json body;
      try {
        body = parse_peer_json(req.body);
      } catch (const json::exception& e) {
        return respond(HttpResponse::error(400, std::string("the body is not JSON: ") + e.what()));
      }
      if (!body.is_object())
        return respond(
            HttpResponse::error(400, "the body must be a JSON object such as {\"policy\":\"p3\"}"));
      return api.switch_policy(body, [respond](int status, json answer) {
        respond(HttpResponse::json(status, answer));
      });
    }
    if (req.path == "/api/prediction") {
      if (!get) return respond(method_not_allowed("GET"));
      return api.prediction(std::move(respond));
    }
    if (req.path == "/favicon.ico") return respond(HttpResponse{204, "image/x-icon", "", {}});
    for (const auto& a : dashboard_assets()) {
      if (a.path != req.path && !(a.path == "/" && req.path == "/index.html")) continue;
      if (!get) return respond(method_not_allowed("GET"));
      return respond(asset(a));
    }
    respond(HttpResponse::error(
        404, "no such resource '" + req.path +
                 "' (try /, /healthz, /api/status, /metrics, /api/policy, /api/prediction)"));
  };
}

}  // namespace psbed::ps
