// `psbed optimize --verify`: rank the configurations by simulation, then launch the best one on
// this host and print what it measured beside what was predicted for it. Then the settings
// check: the recommended slice or partition and credit of a policy, launched beside the others
// the search tried for it, to see that the one recommended measures within a few percent of the
// best (the question users of BytePS and ByteScheduler tune offline).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "cluster/launch.hpp"
#include "core/profile.hpp"
#include "predictor/commands.hpp"

namespace psbed::cluster {

struct VerifyOptions {
  bool enabled = false;
  std::string data = "synthetic";  // what the launched workers train on
  std::int64_t steps = 60;         // steps per worker of the verifying run
  std::string compute;             // "" = replay:<the profile> (many workers fit on few cores)
  std::string out;                 // run folder; "" = runs/verify-<model>-<W>w<S>s-<time>
  double timeout_s = 1800;
  int repeat = 3;  // runs of each setting in the settings check (0: no settings check)
};

// The settings check passes when the recommended setting's median images/s is at most this far
// (in %) below the best median of the settings launched beside it.
constexpr double kSettingsCheckPct = 3.0;

// Runs `psbed optimize` and, if v.enabled, the verifying launch. Returns the exit status.
int run_optimize_verify(const predictor::OptimizeOptions& o, const VerifyOptions& v);

// The launch of configuration `c` into run folder `out` (created), as the ranking simulated it.
LaunchOptions verify_launch(const predictor::OptimizeOptions& o, const VerifyOptions& v,
                            const Profile& profile, const predictor::OptimizeChoice& c,
                            const std::string& out);
// Where the settings check of the verifying run `out` puts its runs.
inline std::string settings_folder(const std::string& out) { return out + "-settings"; }
// The settings check (run_optimize's `settings`: the recommended first), each launched v.repeat
// times, in alternating order, into `folder`; a table of medians on stdout and
// folder/settings.json. Returns 0 when the recommended is within kSettingsCheckPct of the best
// (or nothing has settings to check), 1 when not, a launch's status when one failed.
int verify_settings(const predictor::OptimizeOptions& o, const VerifyOptions& v,
                    const Profile& profile, const std::vector<predictor::OptimizeChoice>& settings,
                    const std::string& folder);

}  // namespace psbed::cluster
