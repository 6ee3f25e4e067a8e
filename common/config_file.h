// Configuration files of xv's programs (`xvd --config FILE`, `xv-worker --config FILE`;
// docs/operations.md § Configuration files). A file is a YAML mapping whose keys are the program's
// long flag names without the leading "--", so every flag is a key, flags added later included:
//
//   state-dir: /var/lib/xv        # = --state-dir /var/lib/xv
//   lease-ms: 30000
//   no-probe: true                # a flag that takes no value: true or false
//   some-list-flag: [a, b]        # a flag that takes several values: a list
//
// Rules, in the order they apply:
//   - a key that is not a flag of the program (or is `config` or `help`) is refused, naming the
//     file, the line and the closest flag name; a key given twice is refused;
//   - a flag given on the command line (or through an environment variable the flag reads) keeps
//     that value: the command line overrides the file;
//   - the file's value goes through the flag's own checks (ranges, choices, types), and a refusal
//     names the file, the line and the key;
//   - a required flag may come from either place.
// `other_keys` are top-level keys the program reads itself from the same file (xv-worker's
// `trainers` list); they are skipped here.
//
// Thread-safety: plain functions; the CLI::App is the caller's and is modified.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "common/status.h"

namespace xv {

struct ConfigFileRules {
  std::string config_flag = "--config";  // the option naming the file (added by the caller)
  std::vector<std::string> other_keys;   // top-level keys read elsewhere, not flags
};

// Applies the YAML text of a config file (called `source` in errors, normally its path) to `app`,
// which has parsed its command line already. InvalidArgument "SOURCE:LINE: KEY: what" on the first
// bad key or value; on error some earlier keys may have been applied.
Status ApplyConfigYaml(CLI::App* app, const std::string& yaml_text, const std::string& source,
                       const ConfigFileRules& rules);
// Reads `path` and applies it as above; IoError naming the path when it cannot be read.
Status ApplyConfigFile(CLI::App* app, const std::string& path, const ConfigFileRules& rules);

// The whole command line of a program with a config file: parses argv (required flags are checked
// only after the file is applied), applies the file named by rules.config_flag when it is given,
// and checks the required flags. Returns -1 when the program should go on; otherwise the exit code
// (0 after --help, 2 after an error, which is printed to stderr).
int ParseCommandLineWithConfigFile(CLI::App* app, int argc, const char* const* argv,
                                   const ConfigFileRules& rules);

// The long flag names of `app` ("--state-dir", ...), help included, in the order they were added.
std::vector<std::string> LongFlagNames(const CLI::App& app);

}  // namespace xv
