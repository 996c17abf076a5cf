// `psbed trace merge`: one trace file for a whole run.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "cluster/commands.hpp"
#include "core/trace.hpp"
#include "core/trace_merge.hpp"

namespace psbed::cluster {

void add_trace(CLI::App& root, TraceCommand& o, std::string& log_level) {
  auto* app = root.add_subcommand("trace", "Work on a run's traces");
  app->require_subcommand(1);
  auto* merge = app->add_subcommand(
      "merge", "Merge a run's traces (one file per node) into one file on one clock");
  merge->footer(
      "Example: psbed trace merge runs/NAME            (writes runs/NAME/trace.json)\n"
      "Nodes on the coordinator's host keep their times; a node on another host is moved by the\n"
      "offset its registration's round trip measured. Open the file in ui.perfetto.dev.\n"
      "Format and lanes: docs/tracing.md.");
  add_common(merge, log_level);
  merge->add_option("run", o.run, "run folder (the launch's --out)")->required();
  merge->add_option("--json", o.out, "file to write (default RUN/trace.json)");
}

int run_trace(const TraceCommand& o) {
  const MergedTrace m = merge_traces(run_trace_files(o.run));
  const std::string out =
      o.out.empty() ? (std::filesystem::path(o.run) / "trace.json").string() : o.out;
  write_trace_json(out, m.doc);
  std::printf("merged %zu traces (%zu events) into %s; ", m.nodes.size(),
              m.doc["traceEvents"].size(), out.c_str());
  if (m.largest_offset_us == 0)
    std::printf("every node on the coordinator's clock\n");
  else
    std::printf("clocks moved by up to %.0f us\n", m.largest_offset_us);
  if (m.without_sync > 0)
    std::printf(
        "%d trace(s) recorded no clock offset (written before psbed measured it): kept as "
        "they are\n",
        m.without_sync);
  return 0;
}

}  // namespace psbed::cluster
