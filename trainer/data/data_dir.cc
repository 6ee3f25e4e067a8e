#include "trainer/data/data_dir.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace xv::data {
namespace {

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// train-NNNNN.xvt with N digits.
bool IsTrainShardName(const std::string& name) {
  const std::string prefix = "train-", suffix = ".xvt";
  if (name.size() <= prefix.size() + suffix.size()) return false;
  if (name.compare(0, prefix.size(), prefix) != 0) return false;
  if (name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) return false;
  for (size_t i = prefix.size(); i < name.size() - suffix.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
  }
  return true;
}

}  // namespace

const char* SplitName(Split split) { return split == Split::kTrain ? "train" : "val"; }

std::string DataDir::ranks_path() const { return path_ + "/tokenizer/ranks.tiktoken"; }
std::string DataDir::tokenizer_json_path() const { return path_ + "/tokenizer/tokenizer.json"; }

Status DataDir::Open(const std::string& dir, std::unique_ptr<DataDir>* data_dir) {
  std::unique_ptr<DataDir> d(new DataDir());
  d->path_ = dir;
  while (d->path_.size() > 1 && d->path_.back() == '/') d->path_.pop_back();
  const std::string meta_path = d->tokenizer_json_path();
  if (!FileExists(meta_path)) {
    return Status::NotFound(meta_path + ": not found: is " + dir +
                            " a data directory? Make one with `xvctl prepare --input ... --out " +
                            dir + "`");
  }
  XV_RETURN_IF_ERROR(tok::ReadTokenizerMeta(meta_path, &d->meta_));
  const std::string bytes_path = d->path_ + "/tokenizer/token_bytes.json";
  XV_RETURN_IF_ERROR(tok::ReadTokenBytes(bytes_path, &d->token_bytes_));
  if (d->token_bytes_.size() != d->meta_.vocab_size) {
    return Status::DataLoss(bytes_path + ": " + std::to_string(d->token_bytes_.size()) +
                            " entries, but " + meta_path + " says vocab_size " +
                            std::to_string(d->meta_.vocab_size));
  }

  const std::string shard_dir = d->path_ + "/shards";
  DIR* dh = ::opendir(shard_dir.c_str());
  if (dh == nullptr) {
    return Status::NotFound(shard_dir +
                            ": cannot read the shard directory: " + std::strerror(errno));
  }
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(dh)) {
    if (IsTrainShardName(e->d_name)) names.emplace_back(e->d_name);
  }
  ::closedir(dh);
  std::sort(names.begin(), names.end());
  for (const auto& n : names) d->train_shards_.push_back(shard_dir + "/" + n);
  if (d->train_shards_.empty()) {
    return Status::NotFound(shard_dir + ": no train shard (train-NNNNN.xvt)");
  }
  d->val_shard_ = shard_dir + "/val-00000.xvt";
  if (!FileExists(d->val_shard_)) {
    return Status::NotFound(d->val_shard_ + ": the pinned validation shard is missing");
  }
  std::vector<std::string> all = d->train_shards_;
  all.push_back(d->val_shard_);
  for (const std::string& shard : all) {
    std::unique_ptr<tok::TokenShardReader> reader;
    XV_RETURN_IF_ERROR(tok::TokenShardReader::Open(shard, &reader, tok::ShardVerify::kStructure));
    if (reader->vocab_size() != d->meta_.vocab_size) {
      return Status::DataLoss(shard + ": vocab size " + std::to_string(reader->vocab_size()) +
                              " does not match the tokenizer's " +
                              std::to_string(d->meta_.vocab_size) + " (" + meta_path + ")");
    }
  }
  *data_dir = std::move(d);
  return Status::Ok();
}

Status DataDir::OpenDocuments(Split split, std::unique_ptr<DocumentSource>* source) const {
  std::unique_ptr<ShardDocumentSource> s;
  XV_RETURN_IF_ERROR(ShardDocumentSource::Open(
      split == Split::kTrain ? train_shards_ : std::vector<std::string>{val_shard_},
      tok::ShardVerify::kFull, &s));
  *source = std::move(s);
  return Status::Ok();
}

Status DataDir::OpenPacker(Split split, const BestFitPackerOptions& options,
                           std::unique_ptr<BestFitPacker>* packer) const {
  std::unique_ptr<DocumentSource> source;
  XV_RETURN_IF_ERROR(OpenDocuments(split, &source));
  return BestFitPacker::Create(std::move(source), options, packer);
}

Status DataDir::OpenLoader(Split split, const BestFitPackerOptions& options, int queue_depth,
                           std::unique_ptr<PrefetchingBatchLoader>* loader) const {
  std::unique_ptr<BestFitPacker> packer;
  XV_RETURN_IF_ERROR(OpenPacker(split, options, &packer));
  return PrefetchingBatchLoader::Create(std::move(packer), queue_depth, loader);
}

}  // namespace xv::data
