// `xvctl tokenize`: JSON lines in, JSON lines out, for people and tests.
//   xvctl tokenize --ranks FILE.tiktoken [--meta tokenizer.json]            {"text": ...} ->
//   {"ids": [...]} xvctl tokenize --ranks FILE.tiktoken [--meta tokenizer.json] --decode   {"ids":
//   [...]} -> {"text": ...}
// Empty lines are skipped. Bad JSON, a missing field, invalid UTF-8 or an id out of range stop the
// command with exit status 1 and a message naming the line number. Decoded bytes that are not valid
// UTF-8 are written with U+FFFD replacements (as tiktoken's decode does).
#pragma once

#include <iosfwd>
#include <string>

#include "common/status.h"

namespace CLI {
class App;
}

namespace xv::tok {

struct TokenizeOptions {
  std::string ranks_path;
  std::string meta_path;  // empty: upstream pattern and specials
  bool decode = false;
};

// Registers the `tokenize` subcommand on `app`; its callback reads std::cin and writes std::cout,
// and exits the process with status 1 on error (message on stderr).
void AddTokenizeCommand(CLI::App* app);

// The command's work, for tests and other callers: reads JSON lines from `in`, writes JSON lines to
// `out`.
Status RunTokenize(const TokenizeOptions& options, std::istream& in, std::ostream& out);

}  // namespace xv::tok
