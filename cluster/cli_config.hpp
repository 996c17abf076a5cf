// --config FILE.toml on every subcommand: keys are the subcommand's long flag names (without the
// dashes; lists as TOML arrays, flags as true/false), flags given on the command line win, and a
// key that names no flag of the subcommand is an error, as is a file that does not exist.
//
// CLI11 (2.1) reads configuration files for the top-level app only, so a subcommand's --config
// hands its file to the top-level app, whose reader files every key under the subcommand that
// named it. Call enable_subcommand_configs on the top-level app before add_config_option.
// The file is TOML as toml++ reads it (CLI11's own reader ran an open array on into the next
// lines); a key alone on its line is `key = true`, as CLI11 took it.
#pragma once
#include <CLI/CLI.hpp>
#include <map>
#include <string>
#include <vector>

#include "core/optimizer.hpp"

namespace psbed::cluster {

void enable_subcommand_configs(CLI::App& root);
// The text of a --config file (`file` names it in errors) as CLI11's items, in the order the file
// gives them, a section's keys with the section as their parent; `key_lines` gets every key's and
// section's line ("train.batch", "[train]"). No key is checked against a command here. Throws
// CLI::ConfigError naming the file and the line.
std::vector<CLI::ConfigItem> read_config_items(std::string body, const std::string& file,
                                               std::map<std::string, int>& key_lines);
void add_config_option(CLI::App* app);
// The names of app's subcommands, ", "-joined, each between `open` and `close`.
std::string subcommand_names(const CLI::App& app, const char* open = "", const char* close = "");

// A decimal number (no hex: std::stod reads 0x10 as 16) in [lo, hi), or (lo, hi) if `above`;
// the error names what was expected. `as_float`: the flag is held as a float, so the value is
// checked as the float it becomes (a learning rate of 1e39 would be infinite, a momentum of
// 0.99999999999 would be 1).
CLI::Validator number_in(const std::string& what, double lo, bool above, double hi,
                         const std::string& expected, bool as_float = false);
// Below 10^9 both (a float setting: finite as a float): past that a value is no setting anyone
// means, and would overflow the whole number or the clock it becomes.
CLI::Validator non_negative(const std::string& what, bool as_float = false);
CLI::Validator positive(const std::string& what);
// SGD momentum: 1 or more never forgets a gradient, and the parameters run away.
CLI::Validator momentum_range();
// --momentum and --weight-decay into `sgd`, as every command that trains registers them.
void add_momentum_and_decay(CLI::App* app, SgdOptions& sgd);

// A seed flag's check, for every subcommand that takes one: a whole decimal number from 0 to
// 2^64 - 1, handed on without leading zeros (CLI11 alone reads -1 and too many digits as
// 2^64 - 1, and 010 as octal 8).
CLI::Validator seed_validator();

// Values in units, checked as the command reads them, so that one it cannot read is a usage
// error (exit status 2) named with its flag, as a number of the wrong kind is: a bandwidth
// ("1gbit"; 0: none, and `unshaped` too where the command takes the word), a duration ("200us"),
// a size ("4MiB").
CLI::Validator bandwidth_value(bool unshaped_word);
CLI::Validator duration_value();
CLI::Validator size_value();
// A flag that has always taken a bare number in its own unit ("s", "ms" or "us": --timeout 3600,
// --straggler-ms 50) takes a duration with its unit too (30s, 500ms, 2min, 1h): the transform
// rewrites it into the flag's unit before CLI11 reads the number, and leaves a bare number to
// the flag's own checks. Its type shows as DURATION in --help.
CLI::Validator duration_in(const std::string& unit);
CLI::Option* as_duration(CLI::Option* o, const std::string& unit);
// The same for a size held as a number of bytes (--max-message-bytes 256MiB).
CLI::Validator bytes_in();
CLI::Option* as_size(CLI::Option* o);
// A --credit flag: 'default' (the policy's own, as leaving it out, as `psbed ctl policy` takes
// it), else a size.
CLI::Validator credit_value();
// A node's --name: it names the node's trace file (<name>.trace.json) and its log lines, so
// letters, digits, '.', '_' and '-' only, not starting with '.' or '-', at most 64 of them.
CLI::Validator node_name_value();
// One of a fixed set of words: "expected bucket or fair, got 'x'".
CLI::Validator one_of(const std::vector<std::string>& words);

// CLI11's parse error in plainer words where it has jargon for a common mistake: a value that is
// not a number ("--batch: Value abc not in range 1 to 1048576" becomes "--batch: expected a
// whole number from 1 to 1048576, got 'abc'"), a one-value flag given twice ("At Most 1 required
// but received 2"). Other messages come back as they are.
std::string plain_parse_error(const std::string& what);

}  // namespace psbed::cluster
