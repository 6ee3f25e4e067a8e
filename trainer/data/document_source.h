// DocumentSource: an endless stream of tokenized documents (each a list of int32 ids starting with
// BOS) with the epoch each one belongs to, as upstream's `_document_batches` yields them.
//  - ShardDocumentSource: the documents of a list of token shards in order, starting again with the
//    first shard after the last one (epoch 1, 2, ...). The train split uses every train shard; the
//    val split uses the one pinned val shard (and also cycles, as upstream does).
//  - InMemoryDocumentSource: a fixed list of documents, cycled the same way (tests, tools).
// Empty documents are skipped (they could never be placed). Thread-safety: one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "tokenizer/token_shard_reader.h"

namespace xv::data {

class DocumentSource {
 public:
  virtual ~DocumentSource() = default;
  // Replaces `*tokens` with the next document and sets `*epoch` (1-based: how many times the source
  // has started from its first document).
  virtual Status Next(std::vector<int32_t>* tokens, int64_t* epoch) = 0;
};

class ShardDocumentSource : public DocumentSource {
 public:
  // Opens every shard (mmap) and verifies it as `verify` says. Errors: a shard that fails to open
  // or verify (its error names the file and offset), shards with different vocab sizes, or no
  // document at all in the shards (DATA_LOSS / INVALID_ARGUMENT naming the files).
  static Status Open(const std::vector<std::string>& shard_paths, tok::ShardVerify verify,
                     std::unique_ptr<ShardDocumentSource>* source);
  Status Next(std::vector<int32_t>* tokens, int64_t* epoch) override;

  uint32_t vocab_size() const { return shards_.front()->vocab_size(); }
  const std::vector<std::unique_ptr<tok::TokenShardReader>>& shards() const { return shards_; }

 private:
  ShardDocumentSource() = default;
  std::vector<std::unique_ptr<tok::TokenShardReader>> shards_;
  size_t shard_ = 0;
  uint64_t doc_ = 0;
  int64_t epoch_ = 1;
};

class InMemoryDocumentSource : public DocumentSource {
 public:
  // REQUIRES: at least one non-empty document.
  explicit InMemoryDocumentSource(std::vector<std::vector<int32_t>> documents);
  Status Next(std::vector<int32_t>* tokens, int64_t* epoch) override;

 private:
  std::vector<std::vector<int32_t>> documents_;
  size_t next_ = 0;
  int64_t epoch_ = 1;
};

}  // namespace xv::data
