// Stragglers and heterogeneous workers, as `psbed launch`, `psbed worker` and `psbed predict`
// take them: "worker-2:compute=2x" (its compute takes twice as long), "worker-0:bandwidth=100mbit"
// (its own link, both directions, at 100 Mbit/s), several keys comma-separated
// ("worker-1:compute=4x,bandwidth=10mbit") and several workers in one text
// ("worker-1:compute=4x,worker-3:bandwidth=10mbit"). One parser, so the live run and its
// prediction read a setting the same way.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace psbed {

struct Straggler {
  int worker = 0;
  double compute_factor = 1;           // its forward, backward and step overhead x this
  double bandwidth_bytes_per_sec = 0;  // its own link, each direction; 0: the cluster's
  bool operator==(const Straggler& o) const {
    return worker == o.worker && compute_factor == o.compute_factor &&
           bandwidth_bytes_per_sec == o.bandwidth_bytes_per_sec;
  }
};

// The keys alone, "compute=2x,bandwidth=100mbit" (psbed worker --straggler), onto `s`. Throws
// psbed::Error naming the value and what was expected.
void parse_straggler_keys(const std::string& text, Straggler& s);

// Every --straggler value of a command line, in order; each "worker-N:" starts a worker's
// settings. A worker named twice, or with N >= `workers` (when `workers` > 0), is refused:
// psbed::Error naming the value and what was expected.
std::vector<Straggler> parse_stragglers(const std::vector<std::string>& texts, int workers = 0);
// The same checks on stragglers from elsewhere (a summary.json, a SimConfig).
void check_stragglers(const std::vector<Straggler>& stragglers, int workers);

// "worker-2:compute=2x" / "worker-0:bandwidth=100.00 Mbit/s": for tables and logs.
std::string to_string(const Straggler& s);
std::string to_string(const std::vector<Straggler>& stragglers);  // "; "-separated, "" for none
// "compute=2x,bandwidth=100000000bit": the keys, parsed back by parse_straggler_keys.
std::string straggler_keys(const Straggler& s);

// summary.json's launch.stragglers: [{"worker", "compute_factor", "bandwidth_bytes_per_sec"}].
nlohmann::json stragglers_json(const std::vector<Straggler>& stragglers);
// Its reverse; throws psbed::Error naming `where` for anything else.
std::vector<Straggler> stragglers_from_json(const nlohmann::json& j, const std::string& where);

// The straggler settings of worker `w` (the defaults where none is given).
Straggler straggler_of(const std::vector<Straggler>& stragglers, int w);

}  // namespace psbed
