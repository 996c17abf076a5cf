// Compute replay (`--compute replay:profile.json`): a Net that computes nothing and sleeps, per
// layer, for a duration drawn from a profiled single-worker run. Everything around it stays real
// (pulls into its parameter buffers, pushes of its gradient buffers, the policy, the traces), so
// 8-32 workers can share a 2-core machine and still measure the parameter server, the network
// and the policy rather than CPU contention. Its gradients are zeros and its loss is 0: replay
// measures throughput, never accuracy.
#pragma once
#include <memory>
#include <string>

#include "core/profile.hpp"
#include "worker/net.hpp"

namespace psbed::worker {

// "real" -> empty; "replay:PATH" -> PATH; anything else throws Error naming the value.
std::string replay_profile_path(const std::string& compute);

// Durations are scaled by batch / profile.batch when the batches differ, and by compute_factor
// (a straggler's, core/straggler.hpp). Throws Error if the profile was taken on another model.
std::unique_ptr<Net> make_replay_net(const ModelSpec& spec, int batch, std::uint64_t seed,
                                     const Profile& profile, const std::string& profile_name,
                                     double compute_factor = 1);

}  // namespace psbed::worker
