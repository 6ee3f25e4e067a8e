// Options and result of `xvctl prepare` (tokenizer/prepare_run.h runs it; docs/data.md describes
// it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/bpe_upstream_defaults.h"
#include "tokenizer/corpus_reader.h"

namespace xv::tok {

struct PrepareOptions {
  std::vector<std::string> inputs;  // files and directories (corpus_files.h rules)
  std::string out_dir;
  uint32_t vocab_size = kUpstreamVocabSize;  // ranks + the 4 reserved specials
  // Validation documents: exactly `val_docs` when >= 0, else round(val_fraction * documents)
  // (at least 1). Either way at least one document stays for training.
  int64_t val_docs = -1;
  double val_fraction = 0.05;
  int threads = 0;                         // 0 = hardware concurrency
  int64_t max_chars = kUpstreamMaxChars;   // tokenizer-training character budget
  int64_t doc_cap = kUpstreamDocCapChars;  // per-document cap while training the tokenizer
  int64_t shard_tokens = 100'000'000;      // a train shard is closed once it holds this many
  TextSeparator txt_separator = TextSeparator::kAuto;
  uint64_t seed = 0;     // the shuffle of documents before the val/train split
  bool force = false;    // redo even when prepare.json says the output is up to date
  bool progress = true;  // progress on stderr (a bar on a TTY, else a line every few seconds)
};

struct PrepareResult {
  bool up_to_date = false;  // nothing was done: prepare.json matched and every output verified
  std::string reason;  // why it was (re)done: "no prepare.json", "inputs changed", "--force", ...
  int64_t input_files = 0;
  int64_t skipped_files = 0;  // left out by the directory rules (e.g. fortune's .dat, .u8 links)
  int64_t input_bytes = 0;    // decompressed bytes of text read
  int64_t documents = 0;
  int64_t train_documents = 0;
  int64_t val_documents = 0;
  int64_t train_tokens = 0;
  int64_t val_tokens = 0;
  int64_t train_shards = 0;
  uint32_t vocab_size = 0;
  double bpe_seconds = 0;
  double encode_seconds = 0;
  double total_seconds = 0;
};

}  // namespace xv::tok
