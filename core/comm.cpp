#include "core/comm.hpp"

#include <algorithm>
#include <cstdio>

#include "core/error.hpp"

namespace psbed {

CommMode parse_comm(const std::string& text) {
  if (text == "ps") return CommMode::kPs;
  if (text == "sfb") return CommMode::kSfb;
  if (text == "hybrid") return CommMode::kHybrid;
  throw Error("unknown communication '" + text + "', expected ps, sfb or hybrid");
}

const char* to_string(CommMode m) {
  switch (m) {
    case CommMode::kPs:
      return "ps";
    case CommMode::kSfb:
      return "sfb";
    case CommMode::kHybrid:
      return "hybrid";
  }
  return "ps";
}

std::string comm_problem(CommMode m, const Consistency& mode) {
  if (m == CommMode::kPs || mode.kind != Consistency::Kind::kAsync) return "";
  return std::string("--comm ") + to_string(m) +
         " needs --mode bsp or ssp:K: async has no step at which every worker's factors are "
         "gathered (Poseidon's SFB is synchronous too); use --comm ps with async";
}

std::int64_t factor_floats(const LayerSpec& l, int batch) {
  return std::int64_t(batch) * (l.in.numel() + l.out.numel());
}

bool CommPlan::any_sfb() const {
  return std::any_of(sfb.begin(), sfb.end(), [](bool b) { return b; });
}

std::string CommPlan::describe(const ModelSpec& spec) const {
  std::string s;
  for (const LayerComm& c : layers) {
    if (!s.empty()) s += ", ";
    char ratio[96];
    const int n = std::snprintf(ratio, sizeof ratio, " (factors %.2fx the ps bytes",
                                c.ps_bytes > 0 ? c.sfb_bytes / c.ps_bytes : 0.0);
    if (c.ps_s > 0)
      std::snprintf(ratio + n, sizeof ratio - std::size_t(n), ", %.2fx the time with messages)",
                    c.sfb_s / c.ps_s);
    else
      std::snprintf(ratio + n, sizeof ratio - std::size_t(n), ")");
    s += spec.layers[c.layer].name + " " + (c.sfb ? "sfb" : "ps") + ratio;
  }
  return s.empty() ? "no fc layer: every layer ps" : s;
}

CommPlan choose_comm(const ModelSpec& spec, CommMode mode, int workers, int shards, int batch,
                     const CommCost& cost) {
  CommPlan plan;
  plan.mode = mode;
  plan.sfb.assign(spec.layers.size(), false);
  const double p = std::max(1, workers), s = std::max(1, shards);
  for (int i = 0; i < int(spec.layers.size()); ++i) {
    const LayerSpec& l = spec.layers[i];
    if (l.type != LayerType::kFc) continue;
    LayerComm c;
    c.layer = i, c.m = l.in.numel(), c.n = l.out.numel();
    // Weights and bias each way; a shard serves workers / shards times its share at most.
    c.ps_bytes = 4.0 * double(c.m * c.n + c.n) * std::max(1.0, p / s);
    c.sfb_bytes = 4.0 * double(factor_floats(l, batch)) * (p - 1);
    // Per tensor a push, its acknowledgment, a pull and its reply. A tensor cut into several
    // parts costs more messages, but its bytes outweigh them by far.
    c.ps_messages = 4.0 * double(l.tensors.size()) * std::max(1.0, p / s);
    c.sfb_messages = 2.0 * (p - 1);
    bool cheaper = c.sfb_bytes < c.ps_bytes;
    if (cost.link_bytes_per_sec > 0) {
      c.ps_s = c.ps_bytes / cost.link_bytes_per_sec + c.ps_messages * cost.message_s;
      c.sfb_s = c.sfb_bytes / cost.link_bytes_per_sec + c.sfb_messages * cost.message_s;
      cheaper = c.sfb_s < c.ps_s;
    }
    c.sfb = mode == CommMode::kSfb || (mode == CommMode::kHybrid && cheaper);
    plan.sfb[std::size_t(i)] = c.sfb;
    plan.layers.push_back(c);
  }
  return plan;
}

}  // namespace psbed
