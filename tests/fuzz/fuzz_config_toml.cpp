// A --config file (cluster/cli_config): TOML through toml++, a key alone on its line taken as a
// flag, every mistake explained in one line naming the file and the line.
#include "cluster/cli_config.hpp"
#include "tests/fuzz/fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::map<std::string, int> key_lines;
  try {
    const auto items =
        psbed::cluster::read_config_items(psbed::fuzz::text_of(data, size), "fuzz.toml", key_lines);
    for (const CLI::ConfigItem& item : items) {
      // Every item is a key the file gives, with the line it is on.
      std::string path;
      for (const std::string& p : item.parents) path += p + ".";
      FUZZ_EXPECT(key_lines.count(path + item.name) == 1);
    }
  } catch (const CLI::ConfigError& e) {
    psbed::fuzz::expect_message(e.what(), "read_config_items");
  }
  return 0;
}
