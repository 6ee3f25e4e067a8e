// TokenShardReader: a read-only, memory-mapped view of one token shard (`*.xvt`, layout in
// token_shard_format.h). Open() checks the magic, version, header checksum and exact file size and,
// with ShardVerify::kFull, every block checksum, the offset table and that every id is below
// vocab_size. Errors name the file and the byte offset of the problem (DATA_LOSS for truncated or
// corrupted shards, NOT_FOUND / IO_ERROR when the file cannot be opened). Thread-safety: after
// Open() the reader is immutable; any number of threads may read concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace xv::tok {

enum class ShardVerify {
  kFull,  // checksums of every block, offset table, token ids < vocab_size (reads the whole file)
  kStructure,  // header, header checksum, file size, checksum-table checksum, offset table bounds
};

class TokenShardReader {
 public:
  static Status Open(const std::string& path, std::unique_ptr<TokenShardReader>* reader,
                     ShardVerify verify = ShardVerify::kFull);
  ~TokenShardReader();
  TokenShardReader(const TokenShardReader&) = delete;
  TokenShardReader& operator=(const TokenShardReader&) = delete;

  const std::string& path() const { return path_; }
  uint32_t vocab_size() const { return vocab_size_; }
  uint32_t token_width() const { return token_width_; }
  uint64_t document_count() const { return document_count_; }
  uint64_t token_count() const { return token_count_; }
  uint64_t file_size() const { return size_; }

  // Number of tokens of document `doc` (REQUIRES: doc < document_count()).
  uint64_t document_length(uint64_t doc) const { return offsets_[doc + 1] - offsets_[doc]; }
  // Index of the first token of document `doc` in the shard (REQUIRES: doc < document_count()).
  uint64_t document_start(uint64_t doc) const { return offsets_[doc]; }
  // Token at shard position `index` (REQUIRES: index < token_count()).
  uint32_t token(uint64_t index) const;
  // Writes tokens [begin, begin + count) of the shard to `out` as int32 (REQUIRES: in range).
  void CopyTokens(uint64_t begin, uint64_t count, int32_t* out) const;
  // Replaces `out` with the ids of document `doc` (REQUIRES: doc < document_count()).
  void ReadDocument(uint64_t doc, std::vector<int32_t>* out) const;

 private:
  TokenShardReader() = default;
  Status Verify(ShardVerify verify);

  std::string path_;
  const unsigned char* data_ = nullptr;  // mmap'ed file, owned
  uint64_t size_ = 0;
  uint32_t vocab_size_ = 0;
  uint32_t token_width_ = 0;
  uint64_t document_count_ = 0;
  uint64_t token_count_ = 0;
  const unsigned char* tokens_ = nullptr;
  const uint64_t* offsets_ = nullptr;  // points into the mapping (8-byte aligned)
};

}  // namespace xv::tok
