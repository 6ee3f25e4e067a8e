// BestFitPacker: upstream's BOS-aligned best-fit packing (prepare.py make_dataloader) over a
// DocumentSource. Each row holds T+1 tokens (inputs = row[:-1], targets = row[1:]) and starts at a
// document start. Before every placement the document buffer is refilled, `refill_chunk` documents
// at a time, until it holds at least `buffer_size` documents; then the largest document that fits
// the rest of the row is placed whole (the earliest buffered one among equal lengths); when none
// fits, the shortest document (the earliest among equal lengths) is cropped to fill the row exactly
// and its rest is dropped. No padding: every position of every row is a token. The batch's epoch is
// the epoch of the last document taken from the source, as upstream reports it. Upstream refills
// 128 documents at a time (its tokenizer batch) with buffer_size 1000;
// tests/reference/packing.json is made with refill_chunk 1 and buffer_size 16.
// Thread-safety: one thread at a time.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "common/status.h"
#include "trainer/data/document_source.h"

namespace xv::data {

struct BestFitPackerOptions {
  int64_t batch_size = 1;      // B: rows per batch
  int64_t seq_len = 2048;      // T: a row holds T + 1 tokens
  int64_t buffer_size = 1000;  // documents kept to choose from
  int64_t refill_chunk = 128;  // documents added per refill
};

class BestFitPacker {
 public:
  // Errors: batch_size, seq_len, buffer_size or refill_chunk < 1 (INVALID_ARGUMENT naming it).
  static Status Create(std::unique_ptr<DocumentSource> source, const BestFitPackerOptions& options,
                       std::unique_ptr<BestFitPacker>* packer);

  // Fills `rows` (batch_size * (seq_len + 1) int32, row-major) with the next batch and sets
  // `*epoch`. Errors come from the document source.
  Status NextBatch(int32_t* rows, int64_t* epoch);

  const BestFitPackerOptions& options() const { return options_; }
  int64_t row_length() const { return options_.seq_len + 1; }
  int64_t batch_elements() const { return options_.batch_size * row_length(); }
  // Documents currently buffered.
  int64_t buffered_documents() const { return buffered_; }

 private:
  BestFitPacker(std::unique_ptr<DocumentSource> source, const BestFitPackerOptions& options)
      : source_(std::move(source)), options_(options) {}
  Status Refill();

  std::unique_ptr<DocumentSource> source_;
  const BestFitPackerOptions options_;
  // Buffered documents by length; each queue keeps arrival order, so its front is the document that
  // comes first in upstream's list among documents of that length.
  std::map<int64_t, std::deque<std::vector<int32_t>>> by_length_;
  int64_t buffered_ = 0;
  int64_t epoch_ = 1;
  std::vector<int32_t> scratch_;
};

}  // namespace xv::data
