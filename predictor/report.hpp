// What the predictor's commands print and write alike: numbers as the tables show them, the
// JSON files, the names of links and runs, the note on seeds that disagree, and the progress
// line a simulating command starts with. One place, so predict, validate and optimize word
// the same thing the same way.
#pragma once
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

namespace psbed::predictor {

// Seeds whose images/s differ by more than this share of the median: the configuration sits
// between two regimes, and either can happen.
constexpr double kRegimeSpreadPct = 10;

// `v` with `prec` decimals ("inf" for infinity), as every table prints its figures.
std::string fmt(double v, int prec = 1);

// Writes `j` to `path` (nothing when empty), indented; throws Error naming an unwritable path.
void write_json(const std::string& path, const nlohmann::json& j);

// "1.00 Gbit/s" from bytes/s; "unlimited" for 0.
std::string bandwidth_text(double bytes_per_sec);

// "runs/sweep/x/" -> "x"
std::string run_name(const std::string& dir);

// What a spread over kRegimeSpreadPct means, as predict's and optimize's tables say it.
std::string regime_edge_note();

// The progress line a simulating command starts with: how much it simulates, on how many threads.
void announce(const char* command, std::size_t configurations, const std::string& source, int seeds,
              int jobs);

}  // namespace psbed::predictor
