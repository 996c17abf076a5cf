#include "cluster/cli_config.hpp"

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace psbed::cluster {
namespace {

// TOML whose keys belong to one subcommand: each item is filed under that subcommand's path. A
// key for an option that excludes one given on the command line (ctl's --run against
// --coordinator) is dropped: the command line wins there too.
class SubcommandToml final : public CLI::ConfigBase {
 public:
  std::vector<std::string> scope;  // subcommand names from the top, e.g. {"bench", "predict"}
  CLI::App* app = nullptr;         // the subcommand that named the file
  std::vector<CLI::ConfigItem> from_config(std::istream& input) const override {
    std::vector<CLI::ConfigItem> items = CLI::ConfigBase::from_config(input), kept;
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
           for (CLI::App* a = app; a != root; a = a->get_parent())
             toml->scope.insert(toml->scope.begin(), a->get_name());
           target->add_result(file);
         },
         "TOML file of options (keys = long flag names); flags win")
      ->configurable(false)
      ->trigger_on_parse();
}

}  // namespace psbed::cluster
