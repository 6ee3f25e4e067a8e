#include "trainer/data/prefetching_batch_loader.h"

namespace xv::data {

Status PrefetchingBatchLoader::Create(std::unique_ptr<BestFitPacker> packer, int queue_depth,
                                      std::unique_ptr<PrefetchingBatchLoader>* loader) {
  if (packer == nullptr) return Status::InvalidArgument("PrefetchingBatchLoader: no packer");
  if (queue_depth < 1) {
    return Status::InvalidArgument("queue_depth: must be >= 1, got " + std::to_string(queue_depth));
  }
  loader->reset(new PrefetchingBatchLoader(std::move(packer), queue_depth));
  return Status::Ok();
}

PrefetchingBatchLoader::PrefetchingBatchLoader(std::unique_ptr<BestFitPacker> packer,
                                               int queue_depth)
    : packer_(std::move(packer)),
      queue_depth_(static_cast<size_t>(queue_depth)),
      batch_size_(packer_->options().batch_size),
      row_length_(packer_->row_length()) {
  thread_ = std::thread([this] { Produce(); });
}

PrefetchingBatchLoader::~PrefetchingBatchLoader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PrefetchingBatchLoader::Produce() {
  const size_t elements = static_cast<size_t>(batch_size_ * row_length_);
  while (true) {
    PackedBatch batch;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || ready_.size() < queue_depth_; });
      if (stop_) return;
      if (!free_buffers_.empty()) {
        batch.tokens = std::move(free_buffers_.back());
        free_buffers_.pop_back();
      }
    }
    batch.tokens.resize(elements);
    batch.batch_size = batch_size_;
    batch.row_length = row_length_;
    Status st = packer_->NextBatch(batch.tokens.data(), &batch.epoch);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!st.ok()) {
        error_ = st;
        cv_.notify_all();
        return;
      }
      ready_.push_back(std::move(batch));
    }
    cv_.notify_all();
  }
}

Status PrefetchingBatchLoader::Next(PackedBatch* batch) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !ready_.empty() || !error_.ok(); });
  if (ready_.empty()) return error_;
  if (batch->tokens.capacity() >= static_cast<size_t>(batch_size_ * row_length_)) {
    free_buffers_.push_back(std::move(batch->tokens));
  }
  *batch = std::move(ready_.front());
  ready_.pop_front();
  lock.unlock();
  cv_.notify_all();
  return Status::Ok();
}

}  // namespace xv::data
