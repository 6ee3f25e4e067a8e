// TokenShardWriter: writes one token shard (`*.xvt`, layout in token_shard_format.h) atomically:
// the data goes to a temporary file beside the target, is fsync'ed, and is renamed over the target
// only by Finish(). A writer destroyed before Finish() (or whose Finish() fails) removes its
// temporary file, so no half-written shard is ever visible under the target name. Thread-safety:
// one thread at a time.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace xv::tok {

class TokenShardWriter {
 public:
  // Starts a shard at `path` for ids in [0, vocab_size). The token width is 2 bytes when
  // vocab_size <= 65536, else 4. Errors: vocab_size 0 or >= 2^32 (INVALID_ARGUMENT), the temporary
  // file cannot be created (IO_ERROR).
  static Status Create(const std::string& path, uint64_t vocab_size,
                       std::unique_ptr<TokenShardWriter>* writer);

  ~TokenShardWriter();
  TokenShardWriter(const TokenShardWriter&) = delete;
  TokenShardWriter& operator=(const TokenShardWriter&) = delete;

  // Appends one document of `count` ids. Errors: an id outside [0, vocab_size) (INVALID_ARGUMENT
  // naming the document and position), a write error (IO_ERROR). After an error the writer is
  // unusable.
  Status AddDocument(const int32_t* ids, size_t count);
  Status AddDocument(const std::vector<int32_t>& ids) {
    return AddDocument(ids.data(), ids.size());
  }

  // Writes the offset table, header and checksums, fsyncs and renames into place (then fsyncs the
  // directory). Call once.
  Status Finish();

  uint64_t document_count() const { return offsets_.size() - 1; }
  uint64_t token_count() const { return offsets_.back(); }
  const std::string& path() const { return path_; }

 private:
  TokenShardWriter(std::string path, std::string temp_path, uint64_t vocab_size, int fd);
  Status WriteAll(const void* data, size_t size);
  Status FlushBuffer();
  void Abandon();

  const std::string path_;
  const std::string temp_path_;
  const uint64_t vocab_size_;
  const uint32_t token_width_;
  int fd_;
  bool failed_ = false;
  bool finished_ = false;
  std::vector<uint64_t> offsets_{0};
  std::vector<char> buffer_;  // pending token bytes, flushed in large writes
};

// Convenience: writes `documents` as one shard at `path` (Create + AddDocument each + Finish).
Status WriteTokenShard(const std::string& path, uint64_t vocab_size,
                       const std::vector<std::vector<int32_t>>& documents);

}  // namespace xv::tok
