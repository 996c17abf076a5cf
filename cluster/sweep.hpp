// `psbed sweep`: a grid of `psbed launch` runs (bandwidth x mode x policy x servers x workers)
// into one folder: a run folder per point and repeat, results.csv and results.json with one row
// per run, results.md with the median per point, and sweep.png (images/s against workers, a
// line per policy, a panel per mode and bandwidth).
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "cluster/launch.hpp"

namespace psbed::cluster {

struct SweepOptions {
  LaunchOptions base;  // everything a point does not vary
  std::vector<int> workers = {1, 2, 4, 8};
  std::vector<int> servers = {1};
  std::vector<std::string> policies = {"bulk", "wfbp", "p3"};  // "all": every policy
  std::vector<std::string> modes = {"bsp"};
  std::vector<std::string> bandwidths = {""};  // "" = unshaped
  int repeat = 1;       // runs per point: OUT/<point>/, then OUT/<point>-r2/, ...
  bool resume = false;  // keep points whose summary.json says ok
  bool plot = true;
};

void add_sweep(CLI::App& root, SweepOptions& o, std::string& log_level);
int run_sweep(SweepOptions opt);

}  // namespace psbed::cluster
