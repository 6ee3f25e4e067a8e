#include "trainer/data/best_fit_packer.h"

#include <algorithm>
#include <cstring>

namespace xv::data {

Status BestFitPacker::Create(std::unique_ptr<DocumentSource> source,
                             const BestFitPackerOptions& options,
                             std::unique_ptr<BestFitPacker>* packer) {
  if (source == nullptr) return Status::InvalidArgument("BestFitPacker: no document source");
  if (options.batch_size < 1) {
    return Status::InvalidArgument("batch_size: must be >= 1, got " +
                                   std::to_string(options.batch_size));
  }
  if (options.seq_len < 1) {
    return Status::InvalidArgument("seq_len: must be >= 1, got " + std::to_string(options.seq_len));
  }
  if (options.buffer_size < 1) {
    return Status::InvalidArgument("buffer_size: must be >= 1, got " +
                                   std::to_string(options.buffer_size));
  }
  if (options.refill_chunk < 1) {
    return Status::InvalidArgument("refill_chunk: must be >= 1, got " +
                                   std::to_string(options.refill_chunk));
  }
  packer->reset(new BestFitPacker(std::move(source), options));
  return Status::Ok();
}

Status BestFitPacker::Refill() {
  for (int64_t i = 0; i < options_.refill_chunk; ++i) {
    XV_RETURN_IF_ERROR(source_->Next(&scratch_, &epoch_));
    const int64_t len = static_cast<int64_t>(scratch_.size());
    by_length_[len].push_back(std::move(scratch_));
    scratch_ = {};
    ++buffered_;
  }
  return Status::Ok();
}

Status BestFitPacker::NextBatch(int32_t* rows, int64_t* epoch) {
  const int64_t capacity = row_length();
  for (int64_t r = 0; r < options_.batch_size; ++r) {
    int32_t* row = rows + r * capacity;
    int64_t pos = 0;
    while (pos < capacity) {
      while (buffered_ < options_.buffer_size) XV_RETURN_IF_ERROR(Refill());
      const int64_t remaining = capacity - pos;
      // Largest length <= remaining (documents are never empty).
      auto it = by_length_.upper_bound(remaining);
      const bool fits = it != by_length_.begin();
      if (fits) {
        --it;
      } else {
        it = by_length_.begin();  // none fits: crop the shortest
      }
      std::deque<std::vector<int32_t>>& queue = it->second;
      const std::vector<int32_t>& doc = queue.front();
      const int64_t take = fits ? static_cast<int64_t>(doc.size()) : remaining;
      std::memcpy(row + pos, doc.data(), static_cast<size_t>(take) * sizeof(int32_t));
      pos += take;
      queue.pop_front();
      if (queue.empty()) by_length_.erase(it);
      --buffered_;
    }
  }
  *epoch = epoch_;
  return Status::Ok();
}

}  // namespace xv::data
