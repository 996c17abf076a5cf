// The HTTP request reader of the coordinator's control plane (ps/http_server): the head as the
// server reads it (up to the blank line), then the parts a handler asks of the request.
#include "ps/http_server.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using psbed::ps::HttpRequest;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  // The server reads until "\r\n\r\n" and parses what comes before it.
  const std::string_view head = input.substr(0, input.find("\r\n\r\n"));
  HttpRequest req;
  if (auto err = psbed::ps::parse_http_head(head, req)) {
    psbed::fuzz::expect_one_line(*err, "parse_http_head");
    (void)psbed::ps::HttpResponse::error(400, *err);  // the server's answer: must not throw
    return 0;
  }
  FUZZ_EXPECT(!req.method.empty() && !req.target.empty() && req.target.front() == '/');
  for (const auto& [name, value] : req.headers) {
    FUZZ_EXPECT(!name.empty());
    FUZZ_EXPECT(req.header(name) == value);
  }
  (void)req.query_param("token");
  (void)req.query_param("");
  (void)req.header("content-length");
  return 0;
}
