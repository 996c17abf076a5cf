// The GPU tests' runner. Where no CUDA device can be used it prints why and exits 77, which
// ctest's SKIP_RETURN_CODE turns into "Skipped": a machine without a GPU must not report these
// as passed. Listing (ctest's test discovery at build time) works everywhere.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

#include "worker/net.hpp"

int main(int argc, char** argv) {
  Catch::Session session;
  if (int rc = session.applyCommandLine(argc, argv)) return rc;
  const Catch::ConfigData& cfg = session.configData();
  const bool listing = cfg.listTests || cfg.listTestNamesOnly || cfg.listTags || cfg.listReporters;
  if (!listing) {
    const std::string why = psbed::worker::gpu_unavailable_reason();
    if (!why.empty()) {
      std::printf("SKIPPED: no CUDA device available: %s\n", why.c_str());
      return 77;
    }
  }
  return session.run();
}
