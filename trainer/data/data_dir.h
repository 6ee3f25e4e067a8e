// DataDir: a data directory made by `xvctl prepare` (layout in docs/data.md):
//   tokenizer/ranks.tiktoken, tokenizer/tokenizer.json, tokenizer/token_bytes.json,
//   shards/train-NNNNN.xvt (one or more), shards/val-00000.xvt (the pinned validation shard),
//   prepare.json.
// Open() reads the tokenizer metadata and token byte lengths and lists the shards, checking each
// shard's header (magic, version, header checksum, size) and that its vocab size matches the
// tokenizer's. The full checksum pass over a split's shards happens when it is opened for reading.
// Thread-safety: immutable after Open(); the Open* factories may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "tokenizer/tiktoken_metadata.h"
#include "trainer/data/best_fit_packer.h"
#include "trainer/data/document_source.h"
#include "trainer/data/prefetching_batch_loader.h"

namespace xv::data {

enum class Split { kTrain, kVal };
const char* SplitName(Split split);

class DataDir {
 public:
  // Errors name the missing or bad file: no tokenizer files (NOT_FOUND, "run xvctl prepare"),
  // token_bytes.json with a length other than vocab_size, no train shard or no val shard
  // (NOT_FOUND), a shard whose header is corrupted or whose vocab size differs (DATA_LOSS).
  static Status Open(const std::string& dir, std::unique_ptr<DataDir>* data_dir);

  const std::string& path() const { return path_; }
  uint32_t vocab_size() const { return meta_.vocab_size; }
  uint32_t bos_id() const { return meta_.bos_id; }
  // Raw UTF-8 byte length of every id (0 for special tokens), vocab_size() entries.
  const std::vector<int32_t>& token_bytes() const { return token_bytes_; }
  const tok::TokenizerMeta& tokenizer_meta() const { return meta_; }
  std::string ranks_path() const;
  std::string tokenizer_json_path() const;
  // Train shards in order (train-00000.xvt, train-00001.xvt, ...).
  const std::vector<std::string>& train_shards() const { return train_shards_; }
  const std::string& val_shard() const { return val_shard_; }

  // The endless document stream of a split (shards fully verified first).
  Status OpenDocuments(Split split, std::unique_ptr<DocumentSource>* source) const;
  // A best-fit packer over a split.
  Status OpenPacker(Split split, const BestFitPackerOptions& options,
                    std::unique_ptr<BestFitPacker>* packer) const;
  // A prefetching loader over a split (queue_depth batches ahead).
  Status OpenLoader(Split split, const BestFitPackerOptions& options, int queue_depth,
                    std::unique_ptr<PrefetchingBatchLoader>* loader) const;

 private:
  DataDir() = default;
  std::string path_;
  tok::TokenizerMeta meta_;
  std::vector<int32_t> token_bytes_;
  std::vector<std::string> train_shards_;
  std::string val_shard_;
};

}  // namespace xv::data
