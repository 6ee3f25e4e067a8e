#include "tokenizer/prepare_command.h"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "tokenizer/prepare_options.h"
#include "tokenizer/prepare_run.h"

namespace xv::tok {

void AddPrepareCommand(CLI::App* app) {
  auto options = std::make_shared<PrepareOptions>();
  auto separator = std::make_shared<std::string>("auto");
  auto quiet = std::make_shared<bool>(false);
  CLI::App* cmd = app->add_subcommand(
      "prepare", "Train the tokenizer and write token shards from a text corpus (docs/data.md)");
  cmd->add_option(
         "--input", options->inputs,
         "Corpus files or directories: .txt (fortune %-separated or blank-line separated), "
         ".jsonl with a \"text\" field, their .gz/.zst variants")
      ->required();
  cmd->add_option("--out", options->out_dir, "Data directory to write")->required();
  cmd->add_option("--vocab-size", options->vocab_size,
                  "Vocabulary size including the 4 reserved specials")
      ->capture_default_str();
  auto* val_docs =
      cmd->add_option("--val-docs", options->val_docs, "Documents in the pinned validation shard");
  cmd->add_option("--val-fraction", options->val_fraction,
                  "Fraction of documents in the validation shard (when --val-docs is not given)")
      ->capture_default_str()
      ->excludes(val_docs);
  cmd->add_option("--threads", options->threads, "Worker threads (0 = all cores)")
      ->capture_default_str();
  cmd->add_option("--max-chars", options->max_chars,
                  "Character budget for tokenizer training (upstream: 1e9)")
      ->capture_default_str();
  cmd->add_option("--doc-cap", options->doc_cap,
                  "Characters of each document used for tokenizer training (upstream: 10000)")
      ->capture_default_str();
  cmd->add_option("--shard-tokens", options->shard_tokens, "Tokens per train shard (about)")
      ->capture_default_str();
  cmd->add_option("--txt-separator", *separator,
                  "Text documents: auto (% lines if any, else blank lines), percent, blank")
      ->capture_default_str();
  cmd->add_option("--seed", options->seed, "Seed of the document shuffle")->capture_default_str();
  cmd->add_flag("--force", options->force, "Redo even when the output is up to date");
  cmd->add_flag("--quiet", *quiet, "No progress on stderr");
  cmd->callback([options, separator, quiet] {
    Status st = ParseTextSeparator(*separator, &options->txt_separator);
    if (!st.ok()) {
      std::fprintf(stderr, "xvctl prepare: %s\n", st.message().c_str());
      std::exit(2);
    }
    options->progress = !*quiet;
    PrepareResult result;
    st = RunPrepare(*options, &result);
    if (!st.ok()) {
      std::fprintf(stderr, "xvctl prepare: %s\n", st.ToString().c_str());
      std::exit(1);
    }
    if (result.up_to_date) {
      std::printf("up to date: %s (%lld input files; use --force to redo)\n",
                  options->out_dir.c_str(), static_cast<long long>(result.input_files));
      return;
    }
    std::printf(
        "prepared %s (%s): %lld files (%lld skipped), %.1f MB, %lld documents -> vocab %u, %lld "
        "train shard(s) "
        "%lld tokens (%lld docs), val %lld tokens (%lld docs); bpe %.1fs, encode %.1fs, total "
        "%.1fs\n",
        options->out_dir.c_str(), result.reason.c_str(), static_cast<long long>(result.input_files),
        static_cast<long long>(result.skipped_files), result.input_bytes / 1e6,
        static_cast<long long>(result.documents), result.vocab_size,
        static_cast<long long>(result.train_shards), static_cast<long long>(result.train_tokens),
        static_cast<long long>(result.train_documents), static_cast<long long>(result.val_tokens),
        static_cast<long long>(result.val_documents), result.bpe_seconds, result.encode_seconds,
        result.total_seconds);
  });
}

}  // namespace xv::tok
