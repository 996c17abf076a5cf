#include "cluster/cli_config.hpp"

#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace psbed::cluster {
namespace {

// The mistakes CLI11's reader takes in silence or reports far from their cause: an array or a
// string left open (the reader runs on into the next lines: `workers = [1, 2` then `servers = 1`
// reads as the value "2servers = 1"), a line that is not `key = value`, a section left open.
// Each is an error naming the file and the line. Returns the text without its comments (the
// reader takes a comment inside a multi-line array, or after a quoted '#', for part of a value).
std::string check_toml_syntax(const std::string& text, const std::string& file) {
  auto fail = [&](int line, const std::string& what) {
    throw CLI::ConfigError("'" + file + "' line " + std::to_string(line) + ": " + what);
  };
  std::istringstream lines(text);
  std::string line, clean;
  int n = 0, depth = 0, opened_at = 0;
  while (std::getline(lines, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::size_t first = line.find_first_not_of(" \t");
    clean += '\n';  // one line out for each line in: the reader's line numbers stay
    if (first == std::string::npos || line[first] == '#') continue;
    const bool continues = depth > 0;  // inside an array opened on an earlier line
    if (!continues && line[first] == '[') {  // a section: [name] on one line
      std::string head = line.substr(first, line.find('#', first) - first);
      head.erase(head.find_last_not_of(" \t") + 1);
      if (head.size() < 3 || head.back() != ']')
        fail(n, "expected a section as [name], got '" + line.substr(first) + "'");
      clean.insert(clean.size() - 1, head);
      continue;
    }
    char quote = 0;
    bool seen_equals = continues;
    std::size_t end = line.size();
    for (std::size_t i = first; i < line.size(); ++i) {
      const char c = line[i];
      if (quote) {
        if (c == '\\' && quote == '"') ++i;
        else if (c == quote) quote = 0;
        continue;
      }
      if (c == '#') {
        end = i;
        break;
      }
      if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '=' && !seen_equals) {
        seen_equals = true;
      } else if (c == '=' && continues && depth > 0) {
        fail(opened_at, "the array opened here is not closed before line " + std::to_string(n));
      } else if (c == '[' && seen_equals) {
        if (depth++ == 0) opened_at = n;
      } else if (c == ']' && seen_equals) {
        if (depth == 0) fail(n, "a ']' closes no array");
        --depth;
      }
    }
    if (quote) fail(n, std::string("a string is not closed (its ") + quote + " has no match on the line)");
    if (!seen_equals) fail(n, "expected key = value, got '" + line.substr(first) + "'");
    const std::size_t last = line.find_last_not_of(" \t", end == 0 ? 0 : end - 1);
    clean.insert(clean.size() - 1, line.substr(0, last == std::string::npos ? 0 : last + 1));
  }
  if (depth > 0) fail(opened_at, "the array opened here is not closed by the end of the file");
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
  std::vector<CLI::ConfigItem> from_config(std::istream& input) const override {
    std::stringstream text;
    text << input.rdbuf();
    std::istringstream clean(check_toml_syntax(text.str(), file));
    std::vector<CLI::ConfigItem> items = CLI::ConfigBase::from_config(clean), kept;
    for (CLI::ConfigItem& item : items) {
      // A section's open and close marks would count its subcommand as given on the command
      // line (a [policy] section would switch `ctl status` to `ctl policy`): values only.
      if (item.name == "++" || item.name == "--") continue;
      if (app != nullptr && item.parents.empty() && overruled(item.name)) continue;
      item.parents.insert(item.parents.begin(), scope.begin(), scope.end());
      kept.push_back(std::move(item));
    }
    return kept;
  }

 private:
  bool overruled(const std::string& name) const {
    const CLI::Option* opt = app->get_option_no_throw("--" + name);
    if (opt == nullptr) return false;
    for (const CLI::Option* other : opt->get_excludes())
      if (other->count() > 0) return true;
    return false;
  }
};

CLI::App* top_of(CLI::App* app) {
  while (app->get_parent() != nullptr) app = app->get_parent();
  return app;
}

}  // namespace

void enable_subcommand_configs(CLI::App& root) {
  root.config_formatter(std::make_shared<SubcommandToml>());
  root.allow_config_extras(CLI::config_extras_mode::error);
  // Filled only through a subcommand's --config; hidden from the top-level help.
  root.set_config("--config")->group("");
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

}  // namespace psbed::cluster
