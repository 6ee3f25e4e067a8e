// TrainingData: the data directory as xv-train sees it (vocabulary facts and batch sources of each
// split), over the torch-free data library (trainer/data/: DataDir, PrefetchingBatchLoader).
// Thread-safety: Open and OpenBatches from one thread; each BatchSource has one consumer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "trainer/train/batch_source.h"

namespace xv::trainer {

class TrainingData {
 public:
  virtual ~TrainingData() = default;

  // Opens `dir` (made by `xvctl prepare`). Errors name the missing or corrupt file.
  static Status Open(const std::string& dir, std::unique_ptr<TrainingData>* out);

  virtual int64_t vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;
  // Raw byte length of every token id (0 for specials), vocab_size() entries.
  virtual const std::vector<int32_t>& token_bytes() const = 0;

  // BOS-aligned best-fit batches of `rows` x (sequence_len + 1) tokens of split "train" or "val".
  virtual Status OpenBatches(const std::string& split, int64_t rows, int64_t sequence_len,
                             std::unique_ptr<BatchSource>* out) = 0;
};

}  // namespace xv::trainer
