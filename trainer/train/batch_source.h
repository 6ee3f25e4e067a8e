// BatchSource: where the training loop and the evaluator get their token rows: each batch is `rows`
// rows of `cols` = T+1 int32 tokens (row-major), inputs = row[:-1], targets = row[1:]. The data
// library's PrefetchingBatchLoader is adapted to it (data_batch_source.h); tests can feed fixed
// batches. Thread-safety: one consumer thread.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"

namespace xv::trainer {

struct TokenBatch {
  std::vector<int32_t> tokens;  // rows * cols
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t epoch = 0;  // passes over the split so far (1-based, as upstream prints it)
};

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Fills `out` with the next batch. Errors: data errors (DataLoss / IoError naming the shard).
  virtual Status Next(TokenBatch* out) = 0;
};

}  // namespace xv::trainer
