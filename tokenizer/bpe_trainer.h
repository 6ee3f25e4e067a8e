// TrainBpe: byte-level BPE training with rustbpe's semantics (upstream prepare.py trains with
// rustbpe).
//
// 1. Each document is cut to its first `doc_cap_chars` code points; documents are consumed until
// the
//    total reaches `max_chars` (the document that crosses the budget is still used), as upstream's
//    text_iterator does.
// 2. Documents are split into chunks by the pattern (several threads), and unique chunks are
// counted.
// 3. Merges: the adjacent pair with the highest total count over all chunks is merged into a new
// token
//    (ids 256, 257, ...). Ties: the pair that is smallest as (left id, right id) wins -- rustbpe's
//    order, so training on the same text gives the same ranks as rustbpe. Within a chunk,
//    occurrences are merged left to right without overlap. Counts are updated incrementally per
//    merge (pair -> chunks index, lazy max-heap). Training stops early when no pair occurs any
//    more.
// The result is the dense ranks list (256 single bytes, then the merges) plus the specials after
// them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "tokenizer/bpe_upstream_defaults.h"
#include "tokenizer/tiktoken_ranks.h"

namespace xv::tok {

struct BpeTrainOptions {
  // Total vocabulary including the specials: ranks = vocab_size - specials.size() (>= 256).
  uint32_t vocab_size = kUpstreamVocabSize;
  std::string pattern = kUpstreamSplitPattern;
  std::vector<std::string> special_tokens = UpstreamSpecialTokens();
  // Per-document cap in code points; <= 0 means no cap.
  int64_t doc_cap_chars = kUpstreamDocCapChars;
  // Character budget over all documents (after the cap); <= 0 means no budget.
  int64_t max_chars = kUpstreamMaxChars;
  // Threads for splitting and counting; 0 = std::thread::hardware_concurrency().
  int threads = 0;
};

struct BpeTrainProgress {
  enum class Phase { kCounting, kMerging, kDone };
  Phase phase = Phase::kCounting;
  int64_t documents = 0;  // documents consumed so far
  int64_t bytes = 0;      // bytes consumed so far (after the cap)
  int64_t chars = 0;      // code points consumed so far (after the cap)
  int64_t unique_chunks = 0;
  uint32_t merges_done = 0;
  uint32_t merges_total = 0;
};
// Called from the training thread now and then (not for every document or merge).
using BpeProgressCallback = std::function<void(const BpeTrainProgress&)>;

// Produces the next document into *text and returns OK, or sets *done = true at the end. A non-OK
// status aborts training and is returned by TrainBpe.
using BpeDocumentSource = std::function<Status(std::string* text, bool* done)>;

struct BpeTrainResult {
  TokenRanks ranks;                   // dense: ranks[r] = bytes of token r
  std::vector<std::string> specials;  // ids ranks.size() + i
  std::string pattern;
  BpeTrainProgress stats;  // final counts
};

// Trains from a document stream. Fails with INVALID_ARGUMENT for bad options, or when a document is
// not valid UTF-8 (naming the document index and byte offset). Thread-compatible; uses its own
// threads.
Status TrainBpe(const BpeTrainOptions& options, const BpeDocumentSource& documents,
                const BpeProgressCallback& progress, BpeTrainResult* result);

// Convenience: trains from texts held in memory.
Status TrainBpe(const BpeTrainOptions& options, const std::vector<std::string>& texts,
                const BpeProgressCallback& progress, BpeTrainResult* result);

}  // namespace xv::tok
