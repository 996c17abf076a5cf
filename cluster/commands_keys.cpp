// `psbed keys` and the CURVE flags every node takes (`--keys DIR`, `--key FILE`).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "cluster/commands.hpp"
#include "ps/curve.hpp"

namespace psbed::cluster {

void add_key_flags(CLI::App* app, std::string& keys, std::string& key_file,
                   const std::string& own) {
  app->add_option("--keys", keys,
                  "CURVE key folder (psbed keys; docs/security.md): every link authenticated and "
                  "encrypted, only keys in its authorized_keys let in (default: plain links)");
  app->add_option("--key", key_file, "this node's secret key (default <keys>/" + own + ".key)");
}

void add_keys(CLI::App& root, KeysCommand& o, std::string& log_level) {
  auto* app = root.add_subcommand(
      "keys", "Make CURVE key pairs for a cluster run with --keys, and their authorized_keys");
  app->footer(
      "Example: psbed keys --out keys --servers 2 --workers 4\n"
      "Writes OUT/NAME.key (secret, mode 0600) and OUT/NAME.pub for coordinator, server-I,\n"
      "worker-I, ctl and each --name, and OUT/authorized_keys listing every public key.\n"
      "Layout and use: docs/security.md.");
  add_common(app, log_level);
  app->add_option("--out", o.out, "folder to write the keys to (created)")->required();
  app->add_option("--servers", o.servers, "key pairs server-0 .. server-(N-1)")
      ->capture_default_str()
      ->check(CLI::Range(0, 10000));
  app->add_option("--workers", o.workers, "key pairs worker-0 .. worker-(N-1)")
      ->capture_default_str()
      ->check(CLI::Range(0, 10000));
  app->add_option("--name", o.names, "another key pair of this name (repeatable)");
}

int run_keys(const KeysCommand& o) {
  std::vector<std::string> names = {"coordinator"};
  for (int i = 0; i < o.servers; ++i) names.push_back("server-" + std::to_string(i));
  for (int i = 0; i < o.workers; ++i) names.push_back("worker-" + std::to_string(i));
  names.push_back("ctl");
  names.insert(names.end(), o.names.begin(), o.names.end());
  const auto files = ps::write_key_set(o.out, names);
  std::printf("%zu key pairs in %s (secret keys NAME.key, public NAME.pub, authorized_keys)\n",
              names.size(), o.out.c_str());
  return files.empty() ? 1 : 0;
}

}  // namespace psbed::cluster
