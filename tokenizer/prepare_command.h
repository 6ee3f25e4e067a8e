// `xvctl prepare`: builds a data directory (tokenizer + token shards) from a text corpus.
//   xvctl prepare --input PATH... --out DIR [--vocab-size 8192] [--val-docs N | --val-fraction F]
//                 [--threads N] [--max-chars N] [--doc-cap N] [--shard-tokens N]
//                 [--txt-separator auto|percent|blank] [--seed N] [--force] [--quiet]
// Prints "up to date: DIR" when nothing needed doing, else a summary; errors go to stderr with exit
// status 1 (2 for a bad --txt-separator; CLI11 reports other usage errors). See docs/data.md.
#pragma once

namespace CLI {
class App;
}

namespace xv::tok {

// Registers the `prepare` subcommand on `app`; its callback runs RunPrepare and exits the process
// with status 1 on error (message on stderr).
void AddPrepareCommand(CLI::App* app);

}  // namespace xv::tok
