#include "cluster/cli_config.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/units.hpp"

namespace psbed::cluster {
namespace {

// The mistakes CLI11's reader takes in silence or reports far from their cause: an array or a
// string left open (the reader runs on into the next lines: `workers = [1, 2` then `servers = 1`
// reads as the value "2servers = 1"), text after an array, a key without a value or a value
// without a key, a line that is neither `key = value` nor a bare flag name, a section left open.
// Each is an error naming the file and the line. Returns what the reader takes well: the text
// without its comments (it would take a comment inside an array, or a quoted '#', for part of a
// value), each array on the line it opens on (it reads `workers = [` alone as the value "["), a
// trailing comma dropped; the other lines of an array are left empty, so line numbers stay.
// The first of `stops` in `line` from `from` on that is outside quotes ("..." with \ escapes, or
// '...'), or line.size(); `open` is the quote left open at the end of the line, 0 if none.
std::size_t find_unquoted(const std::string& line, std::size_t from, const char* stops, char& open) {
  open = 0;
  for (std::size_t i = from; i < line.size(); ++i) {
    const char c = line[i];
    if (open) {
      if (c == '\\' && open == '"') ++i;
      else if (c == open) open = 0;
    } else if (c == '"' || c == '\'') {
      open = c;
    } else if (std::strchr(stops, c) != nullptr) {
      return i;
    }
  }
  return line.size();
}

// A key or section as CLI11 files it: dotted parts without quotes or blanks ("a" . b -> a.b).
std::string key_path(const std::string& key) {
  std::string out;
  for (char c : key)
    if (c != '"' && c != '\'' && c != ' ' && c != '\t') out += c;
  return out;
}

// `key_lines` gets the line of each key by its full path (section.key, as key_path) and of each
// section as "[name]".
std::string check_toml_syntax(const std::string& text, const std::string& file,
                              std::map<std::string, int>& key_lines) {
  auto fail = [&](int line, const std::string& what) {
    throw CLI::ConfigError("'" + file + "' line " + std::to_string(line) + ": " + what);
  };
  auto unclosed = [&](int line, char quote) {
    fail(line, std::string("a string is not closed (its ") + quote + " has no match on the line)");
  };
  auto trim = [](std::string t) {
    const std::size_t a = t.find_first_not_of(" \t");
    if (a == std::string::npos) return std::string();
    return t.substr(a, t.find_last_not_of(" \t") - a + 1);
  };
  std::istringstream lines(text);
  std::vector<std::string> out;  // one line out for each line in
  std::string line, array;       // the array being read, as one line
  int n = 0, depth = 0, opened_at = 0;
  std::size_t opened_index = 0;
  std::string section;  // the [section] the lines are in, as key_path; "" before any
  key_lines.clear();
  auto once = [&](const std::string& key) {
    const std::string path = section.empty() ? key_path(key) : section + "." + key_path(key);
    const auto [at, fresh] = key_lines.emplace(path, n);
    if (!fresh) fail(n, "'" + key + "' is given twice (first on line " + std::to_string(at->second) + ")");
  };
  while (std::getline(lines, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    out.emplace_back();
    const std::size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    std::size_t i = first;
    if (depth == 0) {
      if (line[first] == '[') {  // a section: [name] on one line
        std::string head = trim(line.substr(first, line.find('#', first) - first));
        if (head.size() < 3 || head.back() != ']')
          fail(n, "expected a section as [name], got '" + trim(line) + "'");
        out.back() = head;
        section = key_path(head.substr(1, head.size() - 2));
        key_lines.emplace("[" + section + "]", n);
        continue;
      }
      // The key: up to the first '=' outside quotes.
      char quote = 0;
      i = find_unquoted(line, first, "=#", quote);
      const std::string key = trim(line.substr(first, i - first));
      if (i == line.size() || line[i] == '#') {  // no '=': a bare flag name (CLI11: true)
        if (quote || key.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") !=
                         std::string::npos)
          fail(n, "expected key = value, got '" + trim(line) + "'");
        once(key);
        out.back() = key;
        continue;
      }
      if (key.empty()) fail(n, "a value with no key: '" + trim(line) + "'");
      once(key);
      i = line.find_first_not_of(" \t", i + 1);
      if (i == std::string::npos || line[i] == '#') fail(n, "'" + key + "' has no value");
      if (line[i] != '[') {  // a single value: ends at a '#' outside quotes
        char q = 0;
        const std::size_t end = find_unquoted(line, i, "#", q);
        if (q) unclosed(n, q);
        out.back() = key + " = " + trim(line.substr(i, end - i));
        continue;
      }
      array = key + " = ";
      opened_at = n, opened_index = out.size() - 1;
    }
    // Inside an array (from its '[' on the opening line, or a later line of it).
    char quote = 0;
    std::string piece;
    for (; i < line.size(); ++i) {
      const char c = line[i];
      if (quote) {
        piece += c;
        if (c == '\\' && quote == '"' && i + 1 < line.size()) piece += line[++i];
        else if (c == quote) quote = 0;
        continue;
      }
      if (c == '#') break;
      // Blanks around the brackets and commas go (CLI11 would read `"a" , "b"` as three values).
      if (c == ' ' || c == '\t') {
        if (!piece.empty() && std::string("[, \t").find(piece.back()) == std::string::npos) piece += ' ';
        continue;
      }
      if (c == ',' || c == ']') {
        if (!piece.empty() && piece.back() == ' ') piece.pop_back();
        if (piece.empty() && !array.empty() && array.back() == ' ') array.pop_back();  // from the line before
      }
      if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '=') {
        if (n != opened_at) fail(opened_at, "the array opened here is not closed before line " + std::to_string(n));
        fail(n, "an '=' inside an array (quote the value)");
      } else if (c == '[') {
        if (++depth > 1) fail(n, "an array inside an array: an option takes a list of values");
      } else if (c == ']') {
        if (--depth == 0) {
          // TOML allows a comma after the last value; CLI11 would read an empty one.
          std::string body = trim(array + piece);
          if (!body.empty() && body.back() == ',') body.pop_back();
          out[opened_index] = trim(body) + "]";
          const std::size_t rest = line.find_first_not_of(" \t", i + 1);
          if (rest != std::string::npos && line[rest] != '#')
            fail(n, "unexpected text after the array: '" + trim(line.substr(rest)) + "'");
          break;
        }
      }
      piece += c;
    }
    if (quote) unclosed(n, quote);
    if (depth > 0) {  // the next line's values follow, after a blank unless a comma or the '[' ends this one
      piece = trim(piece);
      if (!piece.empty() && piece.back() != ',' && piece.back() != '[') piece += ' ';
      array += piece;
    }
  }
  if (depth > 0) fail(opened_at, "the array opened here is not closed by the end of the file");
  std::string clean;
  for (const std::string& l : out) clean += l + "\n";
  return clean;
}

// TOML whose keys belong to one subcommand: each item is filed under that subcommand's path. A
// key for an option that excludes one given on the command line (ctl's --run against
// --coordinator) is dropped: the command line wins there too.
class SubcommandToml final : public CLI::ConfigBase {
 public:
  // Comments are gone before the reader sees the text (check_toml_syntax): its own search for
  // '#' would cut a quoted value such as "runs/#3" short.
  SubcommandToml() { comment('\0'); }
  std::vector<std::string> scope;  // subcommand names from the top, e.g. {"bench", "predict"}
  CLI::App* app = nullptr;         // the subcommand that named the file
  std::string file;                // its name, for errors
  mutable std::map<std::string, int> key_lines_;  // the last file's keys and sections -> lines
  std::vector<CLI::ConfigItem> from_config(std::istream& input) const override {
    std::stringstream text;
    text << input.rdbuf();
    std::string body = text.str();
    // A byte-order mark (editors on Windows write one) is no part of the first key.
    if (body.rfind("\xEF\xBB\xBF", 0) == 0) body.erase(0, 3);
    std::istringstream clean(check_toml_syntax(body, file, key_lines_));
    std::vector<CLI::ConfigItem> items = CLI::ConfigBase::from_config(clean), kept;
    for (CLI::ConfigItem& item : items) {
      // A section's open and close marks would count its subcommand as given on the command
      // line (a [policy] section would switch `ctl status` to `ctl policy`): values only.
      if (item.name == "++" || item.name == "--") continue;
      check_key(item);
      if (app != nullptr && item.parents.empty() && overruled(item.name)) continue;
      item.parents.insert(item.parents.begin(), scope.begin(), scope.end());
      kept.push_back(std::move(item));
    }
    return kept;
  }

 private:
  // " line N" of the item's key, or "" if it is not found.
  std::string line_of(const std::string& path) const {
    const auto it = key_lines_.find(path);
    return it == key_lines_.end() ? "" : " line " + std::to_string(it->second);
  }
  // A key that is no long flag of the subcommand (or of the section's sub-subcommand) is refused
  // here, naming the file, the line and the command, rather than by CLI11 ("INI was not able to
  // parse train.stepz").
  void check_key(const CLI::ConfigItem& item) const {
    if (app == nullptr) return;
    const CLI::App* where = app;
    std::string command = "psbed", path;
    for (const std::string& s : scope) command += " " + s;
    for (const std::string& section : item.parents) {
      path += (path.empty() ? "" : ".") + section;
      try {
        where = where->get_subcommand(section);
      } catch (const CLI::OptionNotFound&) {
        const std::string subs = subcommand_names(*where, "[", "]");
        throw CLI::ConfigError("'" + file + "'" + line_of("[" + path + "]") + ": the section [" + path +
                               "] is no subcommand of `" + command + "`" +
                               (subs.empty() ? ", which takes no sections" : ", expected " + subs));
      }
      command += " " + section;
    }
    path += (path.empty() ? "" : ".") + item.name;
    const CLI::Option* opt = where->get_option_no_throw("--" + item.name);
    if (opt == nullptr && item.name.size() == 1) opt = where->get_option_no_throw("-" + item.name);
    if (opt == nullptr) opt = where->get_option_no_throw(item.name);  // a positional, by its name
    if (opt == nullptr)
      throw CLI::ConfigError("'" + file + "'" + line_of(path) + ": unknown key '" + item.name + "': `" +
                             command + "` has no --" + item.name + " (keys are its long flag names, as in `" +
                             command + " --help`)");
    if (!opt->get_configurable())
      throw CLI::ConfigError("'" + file + "'" + line_of(path) + ": '" + item.name +
                             "' cannot be given in a file, only on the command line");
  }
  bool overruled(const std::string& name) const {
    const CLI::Option* opt = app->get_option_no_throw("--" + name);
    if (opt == nullptr) return false;
    for (const CLI::Option* other : opt->get_excludes())
      if (other->count() > 0) return true;
    return false;
  }
};

// A --config file that cannot be read is one line naming it (CLI11: "x.toml was not readable
// (missing?)"); a pipe or a device (`--config <(...)`, /dev/stdin) is taken as it is.
void check_readable(const std::string& file) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(file, ec);
  if (!fs::exists(st))
    throw CLI::ValidationError("--config", "cannot read '" + file + "': " + (ec ? ec.message() : "no such file"));
  if (fs::is_directory(st))
    throw CLI::ValidationError("--config", "cannot read '" + file + "': a folder, expected a TOML file");
  errno = 0;
  if (fs::is_regular_file(st) && !std::ifstream(file))
    throw CLI::ValidationError("--config", "cannot read '" + file + "'" +
                                               (errno ? std::string(": ") + std::strerror(errno) : ""));
}

CLI::App* top_of(CLI::App* app) {
  while (app->get_parent() != nullptr) app = app->get_parent();
  return app;
}

}  // namespace

// A decimal number (no hex: std::stod reads 0x10 as 16) in [lo, hi) or (lo, hi). `as_float`: the
// flag is held as a float, so the value is checked as the float it becomes (a learning rate of
// 1e39 would be infinite, a momentum of 0.99999999999 would be 1).
CLI::Validator number_in(const std::string& what, double lo, bool above, double hi,
                         const std::string& expected, bool as_float) {
  return CLI::Validator(
      [=](std::string& v) {
        double x = std::nan("");
        if (!v.empty() && v.find_first_not_of("0123456789+-.eE") == std::string::npos) {
          try {
            std::size_t used = 0;
            x = std::stod(v, &used);
            if (used != v.size()) x = std::nan("");
          } catch (const std::exception&) {
          }
        }
        if (as_float) x = double(float(x));
        const bool ok = std::isfinite(x) && (above ? x > lo : x >= lo) && x < hi;
        return ok ? std::string() : "expected " + what + ", " + expected + ", got '" + v + "'";
      },
      "NUMBER");
}
CLI::Validator non_negative(const std::string& what, bool as_float) {
  return number_in(what, 0, false, HUGE_VAL, "0 or more", as_float);
}
CLI::Validator positive(const std::string& what) {
  return number_in(what, 0, true, HUGE_VAL, "above 0");
}
// SGD momentum: 1 or more never forgets a gradient, and the parameters run away.
CLI::Validator momentum_range() {
  return number_in("a momentum", 0, false, 1, "0 or more and below 1", true);
}

CLI::Validator seed_validator() {
  return CLI::Validator(
      [](std::string& v) {
        const bool digits = !v.empty() && v.size() <= 20 &&
                            v.find_first_not_of("0123456789") == std::string::npos;
        errno = 0;
        const unsigned long long x = digits ? std::strtoull(v.c_str(), nullptr, 10) : 0;
        if (!digits || errno == ERANGE)
          return "expected a seed, a whole number from 0 to 18446744073709551615, got '" + v + "'";
        v = std::to_string(x);  // what CLI11 then reads: decimal, whatever its leading zeros
        return std::string();
      },
      "UINT");
}

void enable_subcommand_configs(CLI::App& root) {
  root.config_formatter(std::make_shared<SubcommandToml>());
  root.allow_config_extras(CLI::config_extras_mode::error);
  // Filled only through a subcommand's --config; hidden from the top-level help.
  root.set_config("--config")->group("");
}

std::string subcommand_names(const CLI::App& app, const char* open, const char* close) {
  std::string names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App* s) { return !s->get_name().empty(); }))
    names += (names.empty() ? "" : ", ") + (open + sub->get_name() + close);
  return names;
}

void add_config_option(CLI::App* app) {
  CLI::App* root = top_of(app);
  auto toml = std::dynamic_pointer_cast<SubcommandToml>(root->get_config_formatter_base());
  CLI::Option* target = root->get_config_ptr();
  if (!toml || target == nullptr)
    throw std::logic_error("add_config_option before enable_subcommand_configs");
  app->add_option_function<std::string>(
         "--config",
         [app, root, target, toml](const std::string& file) {
           if (target->count() > 0)
             throw CLI::ValidationError("--config", "one file at a time, '" + file + "' is a second");
           if (file.empty()) throw CLI::ValidationError("--config", "expected a file name, got ''");
           check_readable(file);
           toml->scope.clear();
           toml->app = app;
           toml->file = file;
           for (CLI::App* a = app; a != root; a = a->get_parent())
             toml->scope.insert(toml->scope.begin(), a->get_name());
           target->add_result(file);
         },
         "TOML file of options (keys = long flag names); flags win")
      ->configurable(false)
      ->trigger_on_parse();
}

namespace {
// A validator that runs `parse` on the value and says what it refused.
template <class F>
CLI::Validator parsed_by(F parse, const char* type) {
  return CLI::Validator(
      [parse](std::string& v) {
        try {
          parse(v);
        } catch (const Error& e) {
          return std::string(e.what());
        }
        return std::string();
      },
      type);
}
}  // namespace

CLI::Validator node_name_value() {
  return CLI::Validator(
      [](std::string& v) {
        const bool ok = !v.empty() && v.size() <= 64 && v[0] != '.' && v[0] != '-' &&
                        std::all_of(v.begin(), v.end(), [](unsigned char c) {
                          return std::isalnum(c) || c == '.' || c == '_' || c == '-';
                        });
        return ok ? std::string()
                  : "expected letters, digits, '.', '_' and '-' (not first), at most 64 (it names the node's "
                    "trace file), got '" + v + "'";
      },
      "NAME");
}

CLI::Validator bandwidth_value(bool unshaped_word) {
  return parsed_by(
      [unshaped_word](const std::string& v) {
        if (!unshaped_word || v != "unshaped") parse_bandwidth_bps(v);
      },
      "RATE");
}
CLI::Validator duration_value() {
  return parsed_by([](const std::string& v) { parse_duration_s(v); }, "DURATION");
}
CLI::Validator size_value() {
  return parsed_by([](const std::string& v) { parse_bytes(v); }, "SIZE");
}
CLI::Validator credit_value() {
  return CLI::Validator(
      [](std::string& v) {
        if (v == "default") {
          v.clear();
          return std::string();
        }
        try {
          parse_bytes(v);
        } catch (const Error& e) {
          return std::string(e.what()) + " (or 'default': the policy's own)";
        }
        return std::string();
      },
      "SIZE|default");
}

CLI::Validator one_of(const std::vector<std::string>& words) {
  std::string expected;
  for (std::size_t i = 0; i < words.size(); ++i)
    expected += (i == 0 ? "" : i + 1 == words.size() ? " or " : ", ") + words[i];
  return CLI::Validator(
      [words, expected](std::string& v) {
        if (std::find(words.begin(), words.end(), v) != words.end()) return std::string();
        return "expected " + expected + ", got '" + v + "'";
      },
      expected);
}

std::string plain_parse_error(const std::string& what) {
  static const std::regex range(R"(^(\S+): Value (.*) not in range (\S+) to (\S+)$)");
  static const std::regex at_most(R"(^(\S+): At Most 1 required but received (\d+)$)");
  static const std::regex integer(R"(^[+-]?\d+$)");
  static const std::regex real(R"(^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$)");
  std::smatch m;
  if (std::regex_match(what, m, range)) {
    const std::string value = m[2], lo = m[3], hi = m[4];
    const bool whole = std::regex_match(lo, integer) && std::regex_match(hi, integer);
    if (!std::regex_match(value, whole ? integer : real))
      return m[1].str() + ": expected " + (whole ? "a whole number" : "a number") + " from " + lo + " to " + hi +
             ", got '" + value + "'";
  }
  if (std::regex_match(what, m, at_most))
    return m[1].str() + ": takes one value, got " + m[2].str() + " (given twice, or a list in --config)";
  return what;
}

}  // namespace psbed::cluster
