#include "trainer/train/training_data.h"

#include "trainer/data/data_dir.h"

namespace xv::trainer {

namespace {

// Batches from the data library's prefetching loader.
class LoaderBatchSource : public BatchSource {
 public:
  explicit LoaderBatchSource(std::unique_ptr<data::PrefetchingBatchLoader> loader)
      : loader_(std::move(loader)) {}

  Status Next(TokenBatch* out) override {
    XV_RETURN_IF_ERROR(loader_->Next(&batch_));
    out->tokens.swap(batch_.tokens);
    out->rows = batch_.batch_size;
    out->cols = batch_.row_length;
    out->epoch = batch_.epoch;
    return Status::Ok();
  }

 private:
  std::unique_ptr<data::PrefetchingBatchLoader> loader_;
  data::PackedBatch batch_;
};

class DataDirTrainingData : public TrainingData {
 public:
  explicit DataDirTrainingData(std::unique_ptr<data::DataDir> dir) : dir_(std::move(dir)) {}

  int64_t vocab_size() const override { return dir_->vocab_size(); }
  int32_t bos_id() const override { return static_cast<int32_t>(dir_->bos_id()); }
  const std::vector<int32_t>& token_bytes() const override { return dir_->token_bytes(); }

  Status OpenBatches(const std::string& split, int64_t rows, int64_t sequence_len,
                     std::unique_ptr<BatchSource>* out) override {
    data::Split s;
    if (split == "train") {
      s = data::Split::kTrain;
    } else if (split == "val") {
      s = data::Split::kVal;
    } else {
      return Status::InvalidArgument("split: must be train or val, got '" + split + "'");
    }
    data::BestFitPackerOptions options;
    options.batch_size = rows;
    options.seq_len = sequence_len;
    std::unique_ptr<data::PrefetchingBatchLoader> loader;
    XV_RETURN_IF_ERROR(dir_->OpenLoader(s, options, /*queue_depth=*/4, &loader));
    *out = std::make_unique<LoaderBatchSource>(std::move(loader));
    return Status::Ok();
  }

 private:
  std::unique_ptr<data::DataDir> dir_;
};

}  // namespace

Status TrainingData::Open(const std::string& dir, std::unique_ptr<TrainingData>* out) {
  std::unique_ptr<data::DataDir> d;
  XV_RETURN_IF_ERROR(data::DataDir::Open(dir, &d));
  *out = std::make_unique<DataDirTrainingData>(std::move(d));
  return Status::Ok();
}

}  // namespace xv::trainer
