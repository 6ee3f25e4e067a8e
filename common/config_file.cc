#include "common/config_file.h"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

namespace xv {
namespace {

// "FILE:LINE: " for a node of the file.
std::string Where(const std::string& source, const YAML::Mark& mark) {
  return source + ":" + std::to_string(mark.line + 1) + ": ";
}

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// The flag name (without "--") closest to `key`, when one is close enough to be a typo; else "".
std::string ClosestKey(const CLI::App& app, const std::string& key) {
  std::string best;
  size_t best_distance = std::max<size_t>(3, key.size() / 3) + 1;
  for (const std::string& flag : LongFlagNames(app)) {
    const std::string name = flag.substr(2);
    if (name == "help") continue;
    std::string normalised = key;
    std::replace(normalised.begin(), normalised.end(), '_', '-');
    const size_t d = EditDistance(normalised, name);
    if (d < best_distance) {
      best_distance = d;
      best = name;
    }
  }
  return best;
}

// "xvd" for an app parsed from "/usr/local/bin/xvd".
std::string ProgramName(const CLI::App& app) {
  const std::string& name = app.get_name();
  if (name.empty()) return "the program";
  return name.substr(name.rfind('/') == std::string::npos ? 0 : name.rfind('/') + 1);
}

Status UnknownKey(const CLI::App& app, const std::string& key, const std::string& where) {
  const std::string closest = ClosestKey(app, key);
  std::string hint = closest.empty() ? "" : "did you mean '" + closest + "'? ";
  return Status::InvalidArgument(where + key + ": unknown key (" + hint +
                                 "the keys are the long flags of " + ProgramName(app) +
                                 " --help, without '--')");
}

// The values of `key` (`key_where` is "FILE:LINE: KEY: "): a scalar, or a list of scalars.
Status ReadValues(const YAML::Node& value, const std::string& source, const std::string& key,
                  const std::string& key_where, std::vector<std::string>* out) {
  if (value.IsNull()) {
    return Status::InvalidArgument(key_where + "no value (give one, or drop the key)");
  }
  if (value.IsScalar()) {
    out->push_back(value.Scalar());
    return Status::Ok();
  }
  if (!value.IsSequence()) {
    return Status::InvalidArgument(key_where +
                                   "must be a value or a list of values, not a mapping");
  }
  for (const YAML::Node& item : value) {
    if (!item.IsScalar()) {
      return Status::InvalidArgument(Where(source, item.Mark()) + key +
                                     ": a list item must be a plain value");
    }
    out->push_back(item.Scalar());
  }
  if (out->empty())
    return Status::InvalidArgument(key_where + "an empty list (drop the key instead)");
  return Status::Ok();
}

// Gives `option` the file's values and runs its checks and conversion.
Status SetOption(CLI::Option* option, const std::string& key,
                 const std::vector<std::string>& values, const std::string& where) {
  const bool flag_like = option->get_expected_min() == 0;
  if (values.size() > 1 && option->get_items_expected_max() <= 1) {
    return Status::InvalidArgument(where + key + ": takes one value, the file gives a list of " +
                                   std::to_string(values.size()));
  }
  try {
    if (flag_like) {
      option->add_result(option->get_flag_value(key, values[0]));
    } else {
      option->add_result(values);
    }
    option->run_callback();
  } catch (const CLI::Error& e) {
    option->clear();
    std::string what = e.what();
    const std::string prefix = "--" + key + ": ";  // CLI11 names the flag itself; say it once
    if (what.compare(0, prefix.size(), prefix) == 0) what = what.substr(prefix.size());
    return Status::InvalidArgument(where + key + ": " + what);
  }
  return Status::Ok();
}

Status ApplyEntry(CLI::App* app, const std::string& key, const YAML::Node& value,
                  const std::string& source, const std::string& where,
                  const ConfigFileRules& rules) {
  CLI::Option* option = app->get_option_no_throw("--" + key);
  if (option == nullptr || key.empty() || key[0] == '-') return UnknownKey(*app, key, where);
  if (option == app->get_help_ptr() || "--" + key == rules.config_flag) {
    return Status::InvalidArgument(where + key + ": not allowed in a config file");
  }
  std::vector<std::string> values;
  XV_RETURN_IF_ERROR(ReadValues(value, source, key, where + key + ": ", &values));
  if (option->count() > 0) return Status::Ok();  // the command line (or environment) wins
  return SetOption(option, key, values, where);
}

}  // namespace

std::vector<std::string> LongFlagNames(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* option : app.get_options()) {
    for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
  }
  return names;
}

Status ApplyConfigYaml(CLI::App* app, const std::string& yaml_text, const std::string& source,
                       const ConfigFileRules& rules) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(Where(source, e.mark) + "invalid YAML: " + e.msg);
  }
  if (root.IsNull()) return Status::Ok();  // an empty file (or only comments)
  if (!root.IsMap()) {
    return Status::InvalidArgument(Where(source, root.Mark()) +
                                   "must be a mapping of flag names to values");
  }
  std::set<std::string> seen;
  for (const auto& entry : root) {
    const std::string where = Where(source, entry.first.Mark());
    if (!entry.first.IsScalar()) return Status::InvalidArgument(where + "a key must be a name");
    const std::string key = entry.first.Scalar();
    if (!seen.insert(key).second) return Status::InvalidArgument(where + key + ": given twice");
    const auto& others = rules.other_keys;
    if (std::find(others.begin(), others.end(), key) != others.end()) continue;
    XV_RETURN_IF_ERROR(ApplyEntry(app, key, entry.second, source, where, rules));
  }
  return Status::Ok();
}

Status ApplyConfigFile(CLI::App* app, const std::string& path, const ConfigFileRules& rules) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IoError(path + ": cannot read the config file");
  std::stringstream text;
  text << in.rdbuf();
  return ApplyConfigYaml(app, text.str(), path, rules);
}

int ParseCommandLineWithConfigFile(CLI::App* app, int argc, const char* const* argv,
                                   const ConfigFileRules& rules) {
  // Required flags may come from the file: CLI11 must not refuse them before it is read.
  std::vector<CLI::Option*> required =
      app->get_options([](CLI::Option* o) { return o->get_required(); });
  for (CLI::Option* o : required) o->required(false);
  try {
    app->parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app->exit(e);
  }
  const CLI::Option* config = app->get_option_no_throw(rules.config_flag);
  std::string path;
  if (config != nullptr && config->count() > 0) {
    path = config->as<std::string>();
    Status s = ApplyConfigFile(app, path, rules);
    if (!s.ok()) {
      std::cerr << ProgramName(*app) << ": " << s.message() << "\n";
      return 2;
    }
  }
  for (CLI::Option* o : required) {
    if (o->count() > 0) continue;
    std::cerr << ProgramName(*app) << ": " << o->get_name() << " is required"
              << (path.empty() ? ""
                               : " (on the command line or as '" + o->get_name().substr(2) +
                                     ":' in " + path + ")")
              << "\n";
    return 2;
  }
  return -1;
}

}  // namespace xv
