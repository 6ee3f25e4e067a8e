#include "trainer/data/document_source.h"

namespace xv::data {

Status ShardDocumentSource::Open(const std::vector<std::string>& shard_paths,
                                 tok::ShardVerify verify,
                                 std::unique_ptr<ShardDocumentSource>* source) {
  if (shard_paths.empty()) return Status::InvalidArgument("no token shards given");
  std::unique_ptr<ShardDocumentSource> s(new ShardDocumentSource());
  uint64_t tokens = 0;
  for (const std::string& path : shard_paths) {
    std::unique_ptr<tok::TokenShardReader> reader;
    XV_RETURN_IF_ERROR(tok::TokenShardReader::Open(path, &reader, verify));
    if (!s->shards_.empty() && reader->vocab_size() != s->shards_.front()->vocab_size()) {
      return Status::DataLoss(path + ": vocab size " + std::to_string(reader->vocab_size()) +
                              " differs from " + s->shards_.front()->path() + " (" +
                              std::to_string(s->shards_.front()->vocab_size()) + ")");
    }
    tokens += reader->token_count();
    s->shards_.push_back(std::move(reader));
  }
  if (tokens == 0) {
    return Status::DataLoss(shard_paths.front() + ": the shards hold no tokens (" +
                            std::to_string(shard_paths.size()) + " shard(s))");
  }
  *source = std::move(s);
  return Status::Ok();
}

Status ShardDocumentSource::Next(std::vector<int32_t>* tokens, int64_t* epoch) {
  while (true) {
    const tok::TokenShardReader& shard = *shards_[shard_];
    if (doc_ >= shard.document_count()) {
      doc_ = 0;
      if (++shard_ == shards_.size()) {
        shard_ = 0;
        ++epoch_;
      }
      continue;
    }
    const uint64_t d = doc_++;
    if (shard.document_length(d) == 0) continue;
    shard.ReadDocument(d, tokens);
    *epoch = epoch_;
    return Status::Ok();
  }
}

InMemoryDocumentSource::InMemoryDocumentSource(std::vector<std::vector<int32_t>> documents)
    : documents_(std::move(documents)) {}

Status InMemoryDocumentSource::Next(std::vector<int32_t>* tokens, int64_t* epoch) {
  if (documents_.empty()) return Status::InvalidArgument("InMemoryDocumentSource: no documents");
  for (size_t tries = 0; tries <= documents_.size(); ++tries) {
    if (next_ == documents_.size()) {
      next_ = 0;
      ++epoch_;
    }
    const std::vector<int32_t>& doc = documents_[next_++];
    if (doc.empty()) continue;
    *tokens = doc;
    *epoch = epoch_;
    return Status::Ok();
  }
  return Status::InvalidArgument("InMemoryDocumentSource: every document is empty");
}

}  // namespace xv::data
