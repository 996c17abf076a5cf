// The control plane's vocabulary: a live policy switch requested of a running cluster, and the
// client side of `psbed ctl`. The coordinator takes a request ({"event":"ctl","command":"policy",
// "policy":"p3","credit":"2MiB"}) from any peer, tells every worker, and answers once every live
// worker has switched at its next step boundary, with the steps at which they did.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "core/policy.hpp"
#include "ps/curve.hpp"

namespace psbed::ps {

nlohmann::json policy_to_json(const policy::PolicyOptions& o);
// A request's policy fields over `base` (what the cluster runs now): "policy" (name),
// "slice_params", "partition_params" (integers), "credit" ("2MiB" or a byte count; "default").
// Throws psbed::Error naming the field and what was expected; the result is a valid policy.
policy::PolicyOptions policy_from_request(const nlohmann::json& request,
                                          policy::PolicyOptions base);
// The inverse of policy_to_json (used by workers on the coordinator's set_policy message).
policy::PolicyOptions policy_from_json(const nlohmann::json& j);
std::string describe_policy(const policy::PolicyOptions& o);

// Sends `request` to the coordinator and waits for its answer; throws Error if none comes
// within timeout_s or the coordinator cannot be reached. With `keys` on, over CURVE.
nlohmann::json control_request(const std::string& coordinator, nlohmann::json request,
                               double timeout_s, const CurveKeys& keys = {});

}  // namespace psbed::ps
