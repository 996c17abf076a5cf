#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "cluster/cli_config.hpp"
#include "cluster/commands.hpp"

namespace psbed::cluster {

// The subcommands the command line reached, as "psbed bench predict" ("psbed" if none), and
// the last of them in `leaf`.
std::string command_path(const CLI::App& root, const CLI::App** leaf) {
  std::string path = "psbed";
  const CLI::App* app = &root;
  while (!app->get_subcommands().empty()) {
    app = app->get_subcommands().front();
    path += " " + app->get_name();
  }
  if (leaf) *leaf = app;
  return path;
}

namespace {

// The option a command-line word names: `--log-level=debug` names --log-level.
std::string option_name(const std::string& word) { return word.substr(0, word.find('=')); }

// Whether `app` or a subcommand below it has an option `name` for which `pred` holds (one
// subcommand's --json may be a flag where another's takes a file).
bool any_option_below(const CLI::App& app, const std::string& name,
                      const std::function<bool(const CLI::Option&)>& pred) {
  if (const CLI::Option* o = app.get_option_no_throw(name); o != nullptr && pred(*o)) return true;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    if (any_option_below(*sub, name, pred)) return true;
  return false;
}

// The subcommand of `app` named `word`, or nullptr.
const CLI::App* subcommand_named(const CLI::App& app, const std::string& word) {
  const auto found = app.get_subcommands([&](const CLI::App* s) { return s->check_name(word); });
  return found.empty() ? nullptr : found.front();
}

// `psbed --log-level debug bench ps`: a subcommand's options before it (the root takes only
// --help and the hidden --config). One line saying where they go, or naming the word that is
// no subcommand; success if the command line has no such options.
Status options_first_error(const CLI::App& root, int argc, char** argv) {
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; ++i) {  // the root's own options stay where they are
    const CLI::Option* o = root.get_option_no_throw(option_name(argv[i]));
    if (o == nullptr) break;
    if (o->get_items_expected_min() > 0 && std::string(argv[i]).find('=') == std::string::npos) ++i;
  }
  if (i >= argc || argv[i][0] != '-' || std::string(argv[i]) == "--") return Status::success();
  std::string options;
  for (; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--") break;
    if (!word.empty() && word[0] == '-') {
      const std::string name = option_name(word);
      if (!any_option_below(root, name, [](const CLI::Option&) { return true; }))
        return Status::error(
            "psbed: unknown option '" + name +  // a typo: its value would pass for a subcommand
            "' (a subcommand's options go after it; `psbed SUBCOMMAND --help` lists them)");
      options += (options.empty() ? "" : " ") + word;
      // `--log-level debug`: the next word is the option's value, not the subcommand.
      const bool value_next = word.find('=') == std::string::npos &&
                              any_option_below(root, name, [](const CLI::Option& o) {
                                return o.get_items_expected_min() > 0;
                              });
      if (value_next && i + 1 < argc && std::string(argv[i + 1]) != "--")
        options += std::string(" ") + argv[++i];
      continue;
    }
    const CLI::App* sub = subcommand_named(root, word);
    if (sub == nullptr)
      return Status::error("psbed: unknown subcommand '" + word + "', expected one of: " +
                           subcommand_names(root) + " (a subcommand's options go after it)");
    std::string path = "psbed " + word;  // and its own subcommands named after it
    for (++i; i < argc && (sub = subcommand_named(*sub, argv[i])) != nullptr; ++i)
      path += std::string(" ") + argv[i];
    return Status::error("psbed: " + options + ": a subcommand's options go after it (`" + path +
                         " " + options + " ...`)");
  }
  return Status::error("psbed: no subcommand given (" + options +
                       "); expected one of: " + subcommand_names(root));
}

}  // namespace

// A usage error in one line that names the subcommand. A word where a subcommand was required
// (`psbed lanch`, `psbed ctl --run x polcy`) is named with the subcommands there are, rather
// than CLI11's "A subcommand is required"; a subcommand's options given before it are said to
// go after it.
std::string usage_error(const CLI::App& root, const CLI::ParseError& e, int argc, char** argv) {
  if (const Status first = options_first_error(root, argc, argv); !first.ok())
    return first.message();
  const CLI::App* leaf = nullptr;
  const std::string where = command_path(root, &leaf);
  if (leaf->get_require_subcommand_min() > 0)
    for (const std::string& word : leaf->remaining())
      if (!word.empty() && word[0] != '-')
        return where + ": unknown subcommand '" + word +
               "', expected one of: " + subcommand_names(*leaf);
  return where + ": " + plain_parse_error(e.what()) + " (see `" + where + " --help`)";
}

// A list flag's empty item (`--workers 1,,2`, `--workers ""`): CLI11 drops empty items between
// commas (1,,2 ran as 1,2) and reads an empty value as 0, so the raw words are looked at after a
// parse. An error naming the flag, or success if there is none.
Status empty_list_item(const CLI::App& root, int argc, char** argv) {
  const CLI::App* leaf = nullptr;
  const std::string where = command_path(root, &leaf);
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--") break;
    if (word.rfind("--", 0) != 0) continue;
    const std::string name = option_name(word);
    const CLI::Option* o = nullptr;
    for (const CLI::App* app = leaf; app != nullptr && o == nullptr; app = app->get_parent())
      o = app->get_option_no_throw(name);
    if (o == nullptr || o->get_delimiter() == '\0') continue;
    const bool inline_value = word.find('=') != std::string::npos;
    if (!inline_value && i + 1 >= argc) continue;
    // The words CLI11 takes for the list: the next one, and those after it up to an option.
    std::vector<std::string> values = {inline_value ? word.substr(word.find('=') + 1) : argv[++i]};
    if (!inline_value)
      while (i + 1 < argc && argv[i + 1][0] != '-') values.push_back(argv[++i]);
    const char d = o->get_delimiter();
    const std::string doubled(2, d);
    const std::string separated =
        (d == ',' ? std::string("comma") : "'" + std::string(1, d) + "'") + "-separated";
    // An empty value of a number list reads as 0; of a text list it may mean something
    // (sweep --bandwidth "": unshaped), and the command checks it.
    const std::string type = o->get_type_name();
    const bool numbers =
        type.rfind("INT", 0) == 0 || type.rfind("UINT", 0) == 0 || type.rfind("FLOAT", 0) == 0;
    for (const std::string& value : values) {
      if (value.empty() && numbers)
        return Status::error(where + ": " + name +
                             ": an empty value (expected one or more numbers, " + separated + ")");
      if ((!value.empty() && (value.front() == d || value.back() == d)) ||
          value.find(doubled) != std::string::npos)
        return Status::error(where + ": " + name + ": an empty item in '" + value +
                             "' (expected values " + separated + ", none empty)");
    }
  }
  return Status::success();
}

}  // namespace psbed::cluster
