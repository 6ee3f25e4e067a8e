// BOS-aligned best-fit packing against tests/reference/packing.json (made by upstream's
// make_dataloader logic), through memory and through token shards, and the prefetching loader.
#include <cstdlib>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/unit/fixtures/scoped_temp_dir.h"
#include "tokenizer/token_shard_writer.h"
#include "trainer/data/best_fit_packer.h"
#include "trainer/data/document_source.h"
#include "trainer/data/prefetching_batch_loader.h"

namespace xv::data {
namespace {

using ::xv::testing::ScopedTempDir;

struct Reference {
  int64_t B = 0, T = 0, buffer_size = 0;
  std::vector<std::vector<int32_t>> docs;
  std::vector<std::vector<std::vector<int32_t>>> batches;  // [batch][row][T+1]
};

Reference LoadReference() {
  const char* dir = std::getenv("XV_REFERENCE_DIR");
  const std::string path = std::string(dir != nullptr ? dir : "tests/reference") + "/packing.json";
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  nlohmann::json j = nlohmann::json::parse(in);
  Reference r;
  r.B = j.at("B").get<int64_t>();
  r.T = j.at("T").get<int64_t>();
  r.buffer_size = j.at("buffer_size").get<int64_t>();
  r.docs = j.at("docs").get<std::vector<std::vector<int32_t>>>();
  r.batches = j.at("batches").get<std::vector<std::vector<std::vector<int32_t>>>>();
  return r;
}

BestFitPackerOptions ReferenceOptions(const Reference& ref) {
  BestFitPackerOptions o;
  o.batch_size = ref.B;
  o.seq_len = ref.T;
  o.buffer_size = ref.buffer_size;
  o.refill_chunk = 1;  // the reference refills to buffer_size one document at a time
  return o;
}

std::vector<std::vector<int32_t>> Rows(const std::vector<int32_t>& flat, int64_t row_len) {
  std::vector<std::vector<int32_t>> rows;
  for (size_t i = 0; i < flat.size(); i += static_cast<size_t>(row_len)) {
    rows.emplace_back(flat.begin() + static_cast<long>(i),
                      flat.begin() + static_cast<long>(i + row_len));
  }
  return rows;
}

void ExpectReferenceBatches(BestFitPacker* packer, const Reference& ref) {
  std::vector<int32_t> flat(static_cast<size_t>(packer->batch_elements()));
  for (size_t b = 0; b < ref.batches.size(); ++b) {
    int64_t epoch = 0;
    ASSERT_TRUE(packer->NextBatch(flat.data(), &epoch).ok());
    EXPECT_EQ(epoch, 1);
    EXPECT_EQ(Rows(flat, ref.T + 1), ref.batches[b]) << "batch " << b;
  }
}

TEST(BestFitPacker, ReproducesReferencePackingExactly) {
  const Reference ref = LoadReference();
  ASSERT_EQ(ref.B, 3);
  ASSERT_EQ(ref.T, 32);
  ASSERT_EQ(ref.buffer_size, 16);
  ASSERT_EQ(ref.batches.size(), 6u);
  std::unique_ptr<BestFitPacker> packer;
  ASSERT_TRUE(BestFitPacker::Create(std::make_unique<InMemoryDocumentSource>(ref.docs),
                                    ReferenceOptions(ref), &packer)
                  .ok());
  ExpectReferenceBatches(packer.get(), ref);
}

// Writes the reference documents into two shards (200 + 200 documents).
std::vector<std::string> WriteReferenceShards(const ScopedTempDir& dir, const Reference& ref) {
  std::vector<std::string> paths = {dir.File("train-00000.xvt"), dir.File("train-00001.xvt")};
  const size_t half = ref.docs.size() / 2;
  EXPECT_TRUE(
      tok::WriteTokenShard(paths[0], 512, {ref.docs.begin(), ref.docs.begin() + half}).ok());
  EXPECT_TRUE(tok::WriteTokenShard(paths[1], 512, {ref.docs.begin() + half, ref.docs.end()}).ok());
  return paths;
}

TEST(BestFitPacker, ReproducesReferencePackingFromShards) {
  const Reference ref = LoadReference();
  ScopedTempDir dir;
  std::unique_ptr<ShardDocumentSource> source;
  ASSERT_TRUE(
      ShardDocumentSource::Open(WriteReferenceShards(dir, ref), tok::ShardVerify::kFull, &source)
          .ok());
  std::unique_ptr<BestFitPacker> packer;
  ASSERT_TRUE(BestFitPacker::Create(std::move(source), ReferenceOptions(ref), &packer).ok());
  ExpectReferenceBatches(packer.get(), ref);
}

TEST(BestFitPacker, RowsStartWithBosAndEpochsCountPassesOverTheShards) {
  const Reference ref = LoadReference();
  int64_t total_tokens = 0;
  for (const auto& d : ref.docs) total_tokens += static_cast<int64_t>(d.size());
  std::unique_ptr<BestFitPacker> packer;
  ASSERT_TRUE(BestFitPacker::Create(std::make_unique<InMemoryDocumentSource>(ref.docs),
                                    ReferenceOptions(ref), &packer)
                  .ok());
  std::vector<int32_t> flat(static_cast<size_t>(packer->batch_elements()));
  int64_t last_epoch = 1;
  int64_t batches_in_epoch_one = 0;
  // Each batch uses at most 99 tokens plus the cropped remainder of each document it crops, so the
  // 7580 tokens of one pass last at least 7580 / (99 * 2) batches and at most 7580 / 99 + 16.
  for (int b = 0; b < 400; ++b) {
    int64_t epoch = 0;
    ASSERT_TRUE(packer->NextBatch(flat.data(), &epoch).ok());
    for (const auto& row : Rows(flat, ref.T + 1)) ASSERT_EQ(row[0], 0) << "batch " << b;
    ASSERT_GE(epoch, last_epoch);
    ASSERT_LE(epoch, last_epoch + 1);
    last_epoch = epoch;
    if (epoch == 1) ++batches_in_epoch_one;
  }
  EXPECT_GE(last_epoch, 3);
  EXPECT_GE(batches_in_epoch_one, total_tokens / (99 * 2));
  EXPECT_LE(batches_in_epoch_one, total_tokens / 99 + 16);
}

TEST(BestFitPacker, UpstreamRefillChunkKeepsTheBufferAboveItsSize) {
  const Reference ref = LoadReference();
  BestFitPackerOptions o = ReferenceOptions(ref);
  o.refill_chunk = 128;  // upstream's tokenizer batch
  o.buffer_size = 100;
  std::unique_ptr<BestFitPacker> packer;
  ASSERT_TRUE(
      BestFitPacker::Create(std::make_unique<InMemoryDocumentSource>(ref.docs), o, &packer).ok());
  std::vector<int32_t> flat(static_cast<size_t>(packer->batch_elements()));
  int64_t epoch = 0;
  ASSERT_TRUE(packer->NextBatch(flat.data(), &epoch).ok());
  // One refill of 128 documents, then a handful placed.
  EXPECT_LT(packer->buffered_documents(), 128);
  EXPECT_GE(packer->buffered_documents(), 100 - 3 * 33);
  // The first placement chooses among 128 buffered documents, not 16: a different batch.
  EXPECT_NE(Rows(flat, ref.T + 1), ref.batches[0]);
}

TEST(BestFitPacker, RejectsBadOptions) {
  std::unique_ptr<BestFitPacker> packer;
  BestFitPackerOptions o;
  o.seq_len = 0;
  Status st = BestFitPacker::Create(
      std::make_unique<InMemoryDocumentSource>(std::vector<std::vector<int32_t>>{{0, 1}}), o,
      &packer);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("seq_len"), std::string::npos);
}

TEST(PrefetchingBatchLoader, YieldsTheSameBatchesAsThePacker) {
  const Reference ref = LoadReference();
  ScopedTempDir dir;
  const auto paths = WriteReferenceShards(dir, ref);
  std::unique_ptr<ShardDocumentSource> s1, s2;
  ASSERT_TRUE(ShardDocumentSource::Open(paths, tok::ShardVerify::kFull, &s1).ok());
  ASSERT_TRUE(ShardDocumentSource::Open(paths, tok::ShardVerify::kFull, &s2).ok());
  std::unique_ptr<BestFitPacker> direct, for_loader;
  ASSERT_TRUE(BestFitPacker::Create(std::move(s1), ReferenceOptions(ref), &direct).ok());
  ASSERT_TRUE(BestFitPacker::Create(std::move(s2), ReferenceOptions(ref), &for_loader).ok());
  std::unique_ptr<PrefetchingBatchLoader> loader;
  ASSERT_TRUE(PrefetchingBatchLoader::Create(std::move(for_loader), 3, &loader).ok());
  std::vector<int32_t> expected(static_cast<size_t>(direct->batch_elements()));
  PackedBatch batch;
  for (int b = 0; b < 300; ++b) {  // a few epochs
    int64_t epoch = 0;
    ASSERT_TRUE(direct->NextBatch(expected.data(), &epoch).ok());
    ASSERT_TRUE(loader->Next(&batch).ok());
    ASSERT_EQ(batch.batch_size, 3);
    ASSERT_EQ(batch.row_length, 33);
    ASSERT_EQ(batch.tokens, expected) << "batch " << b;
    ASSERT_EQ(batch.epoch, epoch) << "batch " << b;
    if (b < 6) EXPECT_EQ(Rows(batch.tokens, 33), ref.batches[b]);
  }
}

// Yields `good` documents, then fails.
class FailingSource : public DocumentSource {
 public:
  explicit FailingSource(int good) : good_(good) {}
  Status Next(std::vector<int32_t>* tokens, int64_t* epoch) override {
    if (good_-- <= 0) return Status::DataLoss("shard.xvt: offset 64: broken on purpose");
    *tokens = std::vector<int32_t>(10, 1);
    (*tokens)[0] = 0;
    *epoch = 1;
    return Status::Ok();
  }

 private:
  int good_;
};

TEST(PrefetchingBatchLoader, PropagatesSourceErrors) {
  BestFitPackerOptions o;
  o.batch_size = 2;
  o.seq_len = 9;
  o.buffer_size = 4;
  o.refill_chunk = 1;
  std::unique_ptr<BestFitPacker> packer;
  ASSERT_TRUE(BestFitPacker::Create(std::make_unique<FailingSource>(8), o, &packer).ok());
  std::unique_ptr<PrefetchingBatchLoader> loader;
  ASSERT_TRUE(PrefetchingBatchLoader::Create(std::move(packer), 2, &loader).ok());
  PackedBatch batch;
  Status st;
  int good_batches = 0;
  while ((st = loader->Next(&batch)).ok()) ++good_batches;
  EXPECT_EQ(good_batches, 2);  // 8 documents of 10 tokens fill 4 rows of 10 while 4 stay buffered
  EXPECT_EQ(st.code(), Status::Code::kDataLoss);
  EXPECT_NE(st.message().find("broken on purpose"), std::string::npos);
  EXPECT_EQ(loader->Next(&batch).code(), Status::Code::kDataLoss);  // sticky
}

TEST(PrefetchingBatchLoader, DestructorStopsAProducerBlockedOnAFullQueue) {
  const Reference ref = LoadReference();
  std::unique_ptr<BestFitPacker> packer;
  ASSERT_TRUE(BestFitPacker::Create(std::make_unique<InMemoryDocumentSource>(ref.docs),
                                    ReferenceOptions(ref), &packer)
                  .ok());
  std::unique_ptr<PrefetchingBatchLoader> loader;
  ASSERT_TRUE(PrefetchingBatchLoader::Create(std::move(packer), 2, &loader).ok());
  PackedBatch batch;
  ASSERT_TRUE(loader->Next(&batch).ok());
  loader.reset();  // must return (the test's timeout catches a hang)
}

}  // namespace
}  // namespace xv::data
