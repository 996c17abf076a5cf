#include "cluster/cli_config.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
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

// ---- reading a --config file: toml++ parses, this names each mistake by its file and line ----

struct Located {  // an item and where its key is, for the order CLI11 takes them in
  CLI::ConfigItem item;
  int line = 0, column = 0;
};

[[noreturn]] void fail_at(const std::string& file, int line, const std::string& what) {
  throw CLI::ConfigError("'" + file + "' line " + std::to_string(line) + ": " + what);
}

std::string trim(const std::string& t) {
  const std::size_t a = t.find_first_not_of(" \t");
  if (a == std::string::npos) return std::string();
  return t.substr(a, t.find_last_not_of(" \t") - a + 1);
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    if (!l.empty() && l.back() == '\r') l.pop_back();
    lines.push_back(l);
  }
  return lines;
}

std::string joined_path(const std::vector<std::string>& parents, const std::string& name) {
  std::string path;
  for (const std::string& p : parents) path += p + ".";
  return path + name;
}

// Every key's line by its path (section.key) and every section's as "[name]", as `lines` gets
// them; `headers` the sections opened by a [name] line, by their line.
void note_lines(const toml::table& t, const std::vector<std::string>& parents,
                std::map<std::string, int>& lines, std::map<int, std::string>* headers = nullptr) {
  for (auto&& [key, value] : t) {
    const std::string name(key.str());
    if (const toml::table* sub = value.as_table()) {
      const int at = int(sub->source().begin.line);
      lines.emplace("[" + joined_path(parents, name) + "]", at);
      if (headers && !sub->is_inline()) headers->emplace(at, joined_path(parents, name));
      std::vector<std::string> deeper = parents;
      deeper.push_back(name);
      note_lines(*sub, deeper, lines, headers);
    } else {
      lines.emplace(joined_path(parents, name), int(key.source().begin.line));
    }
  }
}

// The line on which a key or a section given twice at line `n` was first given: the lines
// before n parse (the error is the first), and the key lies in the section opened last.
std::string first_given(const std::vector<std::string>& lines, int n, const std::string& path,
                        bool section) {
  std::string before;
  for (int i = 0; i + 1 < n && i < int(lines.size()); ++i) before += lines[i] + "\n";
  std::map<std::string, int> at;
  std::map<int, std::string> headers;
  try {
    note_lines(toml::parse(before), {}, at, &headers);
  } catch (const toml::parse_error&) {
    return "";
  }
  std::string full = path;
  if (!section && !headers.empty()) full = headers.rbegin()->second + "." + path;
  const auto it = at.find(section ? "[" + path + "]" : full);
  return it == at.end() ? "" : " (first on line " + std::to_string(it->second) + ")";
}

// A key or a section as written, without its quotes and blanks ("a" . b -> a.b).
std::string unquoted(const std::string& key) {
  std::string out;
  for (char c : key)
    if (c != '"' && c != '\'' && c != ' ' && c != '\t') out += c;
  return out;
}

// toml++'s error, in the words of the mistake: an array or a string left open (an array runs on
// into the next lines, so toml++ finds it where the next key is), text after a value, a key
// without a value or a value without a key, a key or a section given twice. Others keep its own
// words. Always one line naming the file and the line.
[[noreturn]] void explain(const toml::parse_error& e, const std::vector<std::string>& lines,
                          const std::string& file) {
  const int n = int(e.source().begin.line), column = int(e.source().begin.column);
  std::string what(e.description()), context;
  if (what.rfind("Error while parsing ", 0) == 0 && what.find(": ") != std::string::npos) {
    context = what.substr(20, what.find(": ") - 20);
    what = what.substr(what.find(": ") + 2);
  }
  const std::string line = n >= 1 && n <= int(lines.size()) ? lines[std::size_t(n - 1)] : "";
  const bool at_end = what.find("end-of-file") != std::string::npos;
  if (context == "array") {
    static const std::regex opens(R"(=\s*\[)");
    int opened = std::min(n, int(lines.size()));
    while (opened >= 1 && !std::regex_search(lines[std::size_t(opened - 1)], opens)) --opened;
    if (opened >= 1 && at_end)
      fail_at(file, opened, "the array opened here is not closed by the end of the file");
    if (opened >= 1 && opened < n)
      fail_at(file, opened, "the array opened here is not closed before line " + std::to_string(n));
  }
  if (column >= 1 && std::size_t(column) <= line.size() && line[std::size_t(column - 1)] == '=' &&
      line.rfind('[', std::size_t(column - 1)) != std::string::npos)
    fail_at(file, n, "an '=' inside an array (quote the value)");
  if (context.find("string") != std::string::npos &&
      (at_end || what.find("end-of-line") != std::string::npos ||
       what.find("control characters") != std::string::npos)) {
    const std::size_t eq = line.find('=');
    const std::size_t q = line.find_first_of("\"'", eq == std::string::npos ? 0 : eq);
    fail_at(file, n,
            std::string("a string is not closed (its ") + (q == std::string::npos ? '"' : line[q]) +
                " has no match on the line)");
  }
  if (what.rfind("expected '='", 0) == 0)
    fail_at(file, n, "expected key = value, got '" + trim(line) + "'");
  if (what.rfind("expected value", 0) == 0 && line.find('=') != std::string::npos)
    fail_at(file, n, "'" + trim(line.substr(0, line.find('='))) + "' has no value");
  if (what.rfind("expected a comment or whitespace", 0) == 0 && column >= 1 &&
      std::size_t(column - 1) <= line.size()) {
    const std::string before = trim(line.substr(0, std::size_t(column - 1)));
    fail_at(file, n,
            std::string("unexpected text after the ") +
                (!before.empty() && before.back() == ']' ? "array" : "value") + ": '" +
                trim(line.substr(std::size_t(column - 1))) + "'");
  }
  if (context == "root table" && trim(line).rfind('=', 0) == 0)
    fail_at(file, n, "a value with no key: '" + trim(line) + "'");
  if (what.find("cannot redefine existing") != std::string::npos) {
    if (context == "table header") {
      const std::string head = trim(line.substr(0, line.find('#')));
      // toml++ may name another line than the header's ("[a.b]" after a key a): no brackets.
      const std::string name = head.size() >= 2 ? head.substr(1, head.size() - 2) : head;
      fail_at(
          file, n,
          "the section " + head + " is given twice" + first_given(lines, n, unquoted(name), true));
    }
    const std::string key = trim(line.substr(0, line.find('=')));
    fail_at(file, n, "'" + key + "' is given twice" + first_given(lines, n, unquoted(key), false));
  }
  fail_at(file, n, what);
}

// A value as CLI11 reads it from the command line. A float keeps its spelling where CLI11 reads
// that (0.1, not 0.10000000000000001), so an error about it quotes what the file says.
std::string value_text(const toml::node& v, const std::vector<std::string>& lines) {
  if (const auto* s = v.as_string()) return s->get();
  if (const auto* i = v.as_integer()) return std::to_string(i->get());
  if (const auto* b = v.as_boolean()) return b->get() ? "true" : "false";
  if (const auto* f = v.as_floating_point()) {
    const auto& src = v.source();
    if (src.begin.line == src.end.line && src.begin.line >= 1 && src.begin.line <= lines.size() &&
        src.end.column > src.begin.column) {
      const std::string raw =
          lines[src.begin.line - 1].substr(src.begin.column - 1, src.end.column - src.begin.column);
      if (!raw.empty() && raw.find_first_not_of("0123456789+-.eE") == std::string::npos) return raw;
    }
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", f->get());
    return buf;
  }
  std::ostringstream out;  // a date or a time
  if (const auto* d = v.as_date())
    out << *d;
  else if (const auto* t = v.as_time())
    out << *t;
  else if (const auto* dt = v.as_date_time())
    out << *dt;
  return out.str();
}

// The file's values as CLI11's items, in the order the file gives them: a table's keys go under
// the subcommand it names (a section), an array is one option's list.
void collect(const toml::table& t, const std::vector<std::string>& parents,
             const std::vector<std::string>& lines, const std::string& file,
             std::vector<Located>& out) {
  for (auto&& [key, value] : t) {
    const std::string name(key.str());
    if (const toml::table* sub = value.as_table()) {
      std::vector<std::string> deeper = parents;
      deeper.push_back(name);
      collect(*sub, deeper, lines, file, out);
      continue;
    }
    Located l;
    l.item.parents = parents;
    l.item.name = name;
    l.line = int(key.source().begin.line), l.column = int(key.source().begin.column);
    if (const toml::array* a = value.as_array()) {
      for (const toml::node& x : *a) {
        if (x.is_array() || x.is_table())
          fail_at(file, int(x.source().begin.line),
                  std::string(x.is_array() ? "an array" : "a table") +
                      " inside an array: an option takes a list of values");
        l.item.inputs.push_back(value_text(x, lines));
      }
    } else {
      l.item.inputs.push_back(value_text(value, lines));
    }
    // TOML writes one as \u0000; a file name would end there (a path cut short is another file).
    for (const std::string& v : l.item.inputs)
      if (v.find('\0') != std::string::npos)
        fail_at(file, l.line,
                "'" + name + "' holds a NUL character (\\u0000), which no value takes");
    out.push_back(std::move(l));
  }
}

// "key" alone on its line (spaces and a comment around it allowed) as "key = true": the flag
// form CLI11's reader took. False, `line` unchanged, for any other line.
bool bare_key_as_flag(std::string& line) {
  auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\v' || c == '\f'; };
  auto is_key = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
  };
  std::size_t i = 0;
  while (i < line.size() && is_space(line[i])) ++i;
  const std::size_t key = i;
  while (i < line.size() && is_key(line[i])) ++i;
  if (i == key) return false;
  const std::size_t end = i;
  while (i < line.size() && is_space(line[i])) ++i;
  if (i < line.size() && line[i] != '#') return false;
  line.insert(end, " = true");
  return true;
}

// Parses `text` as TOML. A key alone on its line is `key = true`, as CLI11's reader took it (a
// flag); any other mistake is refused in one line (explain). Such lines are turned into flags
// where toml++ stops at them, one parse each; a file of many flags is first given them all at
// once outside multi-line strings, so that it parses once, not once per flag.
toml::table parse_config(std::string text, const std::string& file) {
  {
    std::vector<std::string> lines = split_lines(text);
    std::string delimiter;  // the open multi-line string's, or empty
    std::vector<bool> flagged_at(lines.size(), false);
    bool changed = false;
    for (std::size_t i = 0; i < lines.size(); ++i) {
      std::string& l = lines[i];
      if (delimiter.empty() && l.find("\"\"\"") == std::string::npos &&
          l.find("\'\'\'") == std::string::npos) {
        flagged_at[i] = bare_key_as_flag(l);
        changed = changed || flagged_at[i];
        continue;
      }
      for (std::size_t at = 0; at < l.size();) {  // opens and closes on this line, in order
        const std::size_t d = l.find(delimiter.empty() ? "\"\"\"" : delimiter, at);
        const std::size_t q = delimiter.empty() ? l.find("\'\'\'", at) : std::string::npos;
        const std::size_t next = std::min(d, q);
        if (next == std::string::npos) break;
        if (delimiter.empty())
          delimiter = next == d ? "\"\"\"" : "\'\'\'";
        else
          delimiter.clear();
        at = next + 3;
      }
    }
    if (changed) {
      std::string flagged;
      for (const std::string& l : lines) flagged += l + "\n";
      try {
        return toml::parse(flagged);
      } catch (const toml::parse_error& e) {
        // A mistake on a line left as it was is the one the file has (the lines before it are
        // the same either way); from one on a line made a flag, the file is read one flag at a
        // time below, as written from that line on.
        const std::size_t n = e.source().begin.line;
        if (n < 1 || n > lines.size() || !flagged_at[n - 1]) explain(e, lines, file);
        // The lines before it parsed as flags, as one flag a parse would have made them too.
        const std::vector<std::string> written = split_lines(text);
        text.clear();
        for (std::size_t i = 0; i < lines.size(); ++i)
          text += (i + 1 < n ? lines : written)[i] + "\n";
      }
    }
  }
  for (;;) {
    try {
      return toml::parse(text);
    } catch (const toml::parse_error& e) {
      std::vector<std::string> lines = split_lines(text);
      const std::size_t n = e.source().begin.line;
      const std::string what(e.description());
      if (what.find("expected '='") == std::string::npos || n < 1 || n > lines.size() ||
          !bare_key_as_flag(lines[n - 1]))
        explain(e, lines, file);
      text.clear();
      for (const std::string& l : lines) text += l + "\n";
    }
  }
}

}  // namespace

std::vector<CLI::ConfigItem> read_config_items(std::string body, const std::string& file,
                                               std::map<std::string, int>& key_lines) {
  // A byte-order mark (editors on Windows write one) is no part of the first key.
  if (body.rfind("\xEF\xBB\xBF", 0) == 0) body.erase(0, 3);
  const toml::table root = parse_config(body, file);
  const std::vector<std::string> lines = split_lines(body);
  note_lines(root, {}, key_lines);
  std::vector<Located> found;
  collect(root, {}, lines, file, found);
  std::stable_sort(found.begin(), found.end(), [](const Located& a, const Located& b) {
    return a.line != b.line ? a.line < b.line : a.column < b.column;
  });
  std::vector<CLI::ConfigItem> items;
  for (Located& l : found) items.push_back(std::move(l.item));
  return items;
}

namespace {

// TOML whose keys belong to one subcommand: each item is filed under that subcommand's path. A
// key for an option that excludes one given on the command line (ctl's --run against
// --coordinator) is dropped: the command line wins there too.
class SubcommandToml final : public CLI::ConfigBase {
 public:
  std::vector<std::string> scope;  // subcommand names from the top, e.g. {"bench", "predict"}
  CLI::App* app = nullptr;         // the subcommand that named the file
  std::string file;                // its name, for errors
  mutable std::map<std::string, int> key_lines_;  // the last file's keys and sections -> lines
  std::vector<CLI::ConfigItem> from_config(std::istream& input) const override {
    std::stringstream text;
    text << input.rdbuf();
    key_lines_.clear();
    std::vector<CLI::ConfigItem> kept;
    for (CLI::ConfigItem& item : read_config_items(text.str(), file, key_lines_)) {
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
        throw CLI::ConfigError("'" + file + "'" + line_of("[" + path + "]") + ": the section [" +
                               path + "] is no subcommand of `" + command + "`" +
                               (subs.empty() ? ", which takes no sections" : ", expected " + subs));
      }
      command += " " + section;
    }
    path += (path.empty() ? "" : ".") + item.name;
    const CLI::Option* opt = where->get_option_no_throw("--" + item.name);
    if (opt == nullptr && item.name.size() == 1) opt = where->get_option_no_throw("-" + item.name);
    if (opt == nullptr) opt = where->get_option_no_throw(item.name);  // a positional, by its name
    if (opt == nullptr)
      throw CLI::ConfigError("'" + file + "'" + line_of(path) + ": unknown key '" + item.name +
                             "': `" + command + "` has no --" + item.name +
                             " (keys are its long flag names, as in `" + command + " --help`)");
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
    throw CLI::ValidationError(
        "--config", "cannot read '" + file + "': " + (ec ? ec.message() : "no such file"));
  if (fs::is_directory(st))
    throw CLI::ValidationError("--config",
                               "cannot read '" + file + "': a folder, expected a TOML file");
  errno = 0;
  if (fs::is_regular_file(st) && !std::ifstream(file))
    throw CLI::ValidationError(
        "--config",
        "cannot read '" + file + "'" + (errno ? std::string(": ") + std::strerror(errno) : ""));
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
// Bounded: a number past 10^9 is no setting anyone means (seconds: 31 years), and one converted
// to a whole number or a clock's ticks would overflow. A float setting (a learning rate) is
// bounded by the float it becomes: a learning rate of 10^30 is how a test makes gradients
// infinite.
CLI::Validator non_negative(const std::string& what, bool as_float) {
  if (as_float) return number_in(what, 0, false, HUGE_VAL, "0 or more", true);
  return number_in(what, 0, false, 1e9, "0 or more and below 10^9");
}
CLI::Validator positive(const std::string& what) {
  return number_in(what, 0, true, 1e9, "above 0 and below 10^9");
}
// SGD momentum: 1 or more never forgets a gradient, and the parameters run away.
CLI::Validator momentum_range() {
  return number_in("a momentum", 0, false, 1, "0 or more and below 1", true);
}

void add_momentum_and_decay(CLI::App* app, SgdOptions& sgd) {
  app->add_option("--momentum", sgd.momentum, "SGD momentum")
      ->capture_default_str()
      ->check(momentum_range());
  app->add_option("--weight-decay", sgd.weight_decay, "L2 weight decay")
      ->capture_default_str()
      ->check(non_negative("a weight decay", true));
}

CLI::Validator seed_validator() {
  return CLI::Validator(
      [](std::string& v) {
        const bool digits =
            !v.empty() && v.size() <= 20 && v.find_first_not_of("0123456789") == std::string::npos;
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
  for (const CLI::App* sub :
       app.get_subcommands([](const CLI::App* s) { return !s->get_name().empty(); }))
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
             throw CLI::ValidationError("--config",
                                        "one file at a time, '" + file + "' is a second");
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
                  : "expected letters, digits, '.', '_' and '-' (not first), at most 64 (it names "
                    "the node's "
                    "trace file), got '" +
                        v + "'";
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
namespace {
// A plain number, as CLI11 would read it: left to the flag's own checks, so that what they say
// about a bare number stays as it was.
bool plain_number(const std::string& v) {
  std::size_t pos = 0;
  try {
    std::stod(v, &pos);
  } catch (const std::exception&) {
    return false;
  }
  return pos == v.size();
}
}  // namespace

CLI::Validator duration_in(const std::string& unit) {
  const double scale = unit == "ms" ? 1e-3 : unit == "us" ? 1e-6 : 1.0;
  const std::string bare = unit == "ms"   ? "milliseconds"
                           : unit == "us" ? "microseconds"
                                          : "seconds";
  return CLI::Validator(
      [scale, bare](std::string& v) {
        if (plain_number(v)) return std::string();
        try {
          const double s = parse_duration_in(v, scale, 1e9);
          char buf[40];
          std::snprintf(buf, sizeof buf, "%.17g", s / scale);
          v = buf;
          return std::string();
        } catch (const Error& e) {
          return std::string(e.what()) + " (a number of " + bare +
                 ", or one with its unit: 30s, 500ms, 2min, 1h)";
        }
      },
      "");
}

CLI::Validator bytes_in() {
  return CLI::Validator(
      [](std::string& v) {
        if (plain_number(v)) return std::string();
        try {
          v = std::to_string(parse_bytes(v));
          return std::string();
        } catch (const Error& e) {
          return std::string(e.what()) + " (a number of bytes, or one with its unit: 256MiB)";
        }
      },
      "");
}

CLI::Option* as_duration(CLI::Option* o, const std::string& unit) {
  return o->transform(duration_in(unit))->type_name("DURATION");
}

CLI::Option* as_size(CLI::Option* o) { return o->transform(bytes_in())->type_name("SIZE"); }

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
      return m[1].str() + ": expected " + (whole ? "a whole number" : "a number") + " from " + lo +
             " to " + hi + ", got '" + value + "'";
  }
  if (std::regex_match(what, m, at_most))
    return m[1].str() + ": takes one value, got " + m[2].str() +
           " (given twice, or a list in --config)";
  return what;
}

}  // namespace psbed::cluster
