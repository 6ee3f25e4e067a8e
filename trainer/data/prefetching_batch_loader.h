// PrefetchingBatchLoader: runs a BestFitPacker on a background thread that keeps up to
// `queue_depth` packed batches ready, so the trainer never waits for packing. Each batch is one
// contiguous int32 buffer of B rows of T+1 tokens (row-major) that the trainer can wrap without a
// copy (inputs = [:, :-1], targets = [:, 1:]), plus its epoch. The batches come out in exactly the
// order the packer makes them. Lifetime: the destructor stops and joins the thread (it never waits
// for a batch to be consumed). Thread-safety: Next() from one consumer thread at a time; the
// producer thread is internal.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/status.h"
#include "trainer/data/best_fit_packer.h"

namespace xv::data {

struct PackedBatch {
  std::vector<int32_t> tokens;  // batch_size * row_length ids
  int64_t batch_size = 0;       // B
  int64_t row_length = 0;       // T + 1
  int64_t epoch = 0;
  int32_t* data() { return tokens.data(); }
  const int32_t* data() const { return tokens.data(); }
};

class PrefetchingBatchLoader {
 public:
  // Takes ownership of `packer` and starts the producer thread. queue_depth >= 1.
  static Status Create(std::unique_ptr<BestFitPacker> packer, int queue_depth,
                       std::unique_ptr<PrefetchingBatchLoader>* loader);
  ~PrefetchingBatchLoader();
  PrefetchingBatchLoader(const PrefetchingBatchLoader&) = delete;
  PrefetchingBatchLoader& operator=(const PrefetchingBatchLoader&) = delete;

  // Blocks until the next batch is ready and moves it into `*batch`. The buffer `*batch` held
  // before the call is recycled for a later batch, so pointers into it must not be used after
  // Next(). Batches made before a packer failure are delivered first; then this and every later
  // call return the packer's error.
  Status Next(PackedBatch* batch);

  int64_t batch_size() const { return batch_size_; }
  int64_t row_length() const { return row_length_; }

 private:
  PrefetchingBatchLoader(std::unique_ptr<BestFitPacker> packer, int queue_depth);
  void Produce();

  std::unique_ptr<BestFitPacker> packer_;  // used only by the producer thread
  const size_t queue_depth_;
  const int64_t batch_size_;
  const int64_t row_length_;

  std::mutex mu_;
  std::condition_variable cv_;                      // signalled on any change below
  std::deque<PackedBatch> ready_;                   // guarded by mu_
  std::vector<std::vector<int32_t>> free_buffers_;  // guarded by mu_
  Status error_;       // guarded by mu_: the producer's failure, sticky
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace xv::data
