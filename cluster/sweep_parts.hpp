// The pieces of `psbed sweep` (cluster/sweep.hpp), a file a stage: the grid of points and
// their launch command lines (sweep_grid.cpp), what --resume keeps and checks
// (sweep_resume.cpp), the results files and the plot (sweep_results.cpp); sweep.cpp runs them.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "cluster/sweep.hpp"
#include "ps/stop_signals.hpp"

namespace psbed::cluster::sweep_detail {
using json = nlohmann::json;

struct Point {
  std::string bandwidth, mode, policy;
  int servers = 1, workers = 1;
  std::string name;  // the point's folder under OUT; repeat k > 1 goes to <name>-r<k>
  int repeat = 1;
  std::string folder() const { return repeat == 1 ? name : name + "-r" + std::to_string(repeat); }
};

// ---- sweep_grid.cpp ----
std::string slug(const std::string& s);
std::string point_bandwidth(const std::string& b);
bool same_rate(const std::string& a, const std::string& b);
std::string num(double v);
std::string hms(double s);
std::string joined(const std::vector<std::string>& items, const char* sep);
bool has_value(const std::vector<std::string>& v, const std::string& x);
// A summary.json (or sweep-settings.json), or null if it is missing or no JSON.
json read_summary(const std::string& path);
std::vector<std::string> launch_args(const LaunchOptions& o);
// Refuses, before the first run, a grid a sweep cannot run (a typo must not surface an hour
// in); "all" policies become their names, and each link its point_bandwidth.
void check_grid(SweepOptions& opt);
// The grid's points, bandwidth x mode x policy x servers x workers, then its repeats.
std::vector<Point> make_grid(const SweepOptions& opt);

// ---- sweep.cpp ----
// Runs `psbed launch ARGS` as a child process, its output into LOG; returns its exit status (130:
// Ctrl-C or a closed terminal). A stop the caller takes meanwhile reaches the launch too.
int run_launch_child(const std::vector<std::string>& args, const std::string& log,
                     ps::BlockedStopSignals& stops);

// ---- sweep_resume.cpp ----
extern const char* const kPolicyFlags[3];
std::map<std::string, std::string> shared_flags(const LaunchOptions& o);
std::string failed_aside(const std::string& folder);
std::map<std::string, Point> finished_points(const std::string& out);
// With --resume, refuses an OUT whose finished runs ran with other settings than this sweep's;
// then records this sweep's shared settings in OUT/sweep-settings.json.
void check_kept_runs(const SweepOptions& opt);
// --resume: the finished runs in OUT this call did not visit, as rows after its own.
void carry_kept_runs(const SweepOptions& opt, json& rows, std::ostream& csv);

// ---- sweep_results.cpp ----
extern const char* const kCsvHeader;
std::string run_failure(const json& s);
bool finished_ok(const json& s);
json result_row(const Point& p, const LaunchOptions& o, const json& s, const std::string& failure);
std::string csv_row(const LaunchOptions& o, const json& r);
// results.json and results.md.
void write_results(const SweepOptions& opt, const json& rows);
void plot_results(const std::string& out);

}  // namespace psbed::cluster::sweep_detail
