// Whether the host of a tcp:// endpoint resolves. ZeroMQ resolves a connect's host in the
// background and retries for ever, so a misspelt host looks like a peer that never answers; the
// nodes ask this when they give up (or before they start waiting) to say which it was.
#pragma once
#include <string>

namespace psbed::ps {

// "" when `endpoint` is not tcp://HOST:PORT, its host is a numeric address or *, or it resolves;
// otherwise one clause for an error line: "its host 'HOST' does not resolve (REASON)".
std::string unresolved_host(const std::string& endpoint);

}  // namespace psbed::ps
