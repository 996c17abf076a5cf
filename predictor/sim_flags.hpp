// From a prediction command's flags to what the simulator takes: the configuration every
// simulated point starts from, the policies "all" names, and the model a profile was taken on.
#pragma once
#include <string>
#include <vector>

#include "core/profile.hpp"
#include "predictor/commands.hpp"
#include "predictor/simulator.hpp"

namespace psbed::predictor {

// The configuration shared by every simulated point, from the flags and the profile's link;
// throws Error naming a flag whose value cannot be read.
SimConfig base_config(const Profile& profile, const SimFlags& flags);

// The policy names given, "all" replaced by every policy.
std::vector<std::string> expand_policies(const std::vector<std::string>& names);

}  // namespace psbed::predictor
