// Token shards: round trips in both token widths, and clear errors (file + offset) for truncated,
// corrupted, foreign and inconsistent files; no temporary file is left behind by a failed writer.
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <random>

#include <gtest/gtest.h>

#include "tests/unit/fixtures/scoped_temp_dir.h"
#include "tokenizer/token_shard_format.h"
#include "tokenizer/token_shard_reader.h"
#include "tokenizer/token_shard_writer.h"

namespace xv::tok {
namespace {

using ::xv::testing::ReadBytes;
using ::xv::testing::ScopedTempDir;
using ::xv::testing::WriteBytes;

std::vector<std::vector<int32_t>> RandomDocuments(int count, int max_len, int32_t vocab,
                                                  uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int32_t>> docs(count);
  for (auto& d : docs) {
    d.resize(1 + rng() % max_len);
    for (auto& t : d) t = static_cast<int32_t>(rng() % vocab);
  }
  return docs;
}

size_t EntriesIn(const std::string& dir) {
  size_t n = 0;
  for (auto it = std::filesystem::directory_iterator(dir);
       it != std::filesystem::directory_iterator(); ++it) {
    ++n;
  }
  return n;
}

void ExpectRoundTrip(const std::string& path, int32_t vocab, uint32_t expected_width) {
  const auto docs = RandomDocuments(300, 700, vocab, 7);
  ASSERT_TRUE(WriteTokenShard(path, vocab, docs).ok());
  std::unique_ptr<TokenShardReader> r;
  Status st = TokenShardReader::Open(path, &r);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(r->vocab_size(), static_cast<uint32_t>(vocab));
  EXPECT_EQ(r->token_width(), expected_width);
  ASSERT_EQ(r->document_count(), docs.size());
  uint64_t total = 0;
  std::vector<int32_t> got;
  for (size_t i = 0; i < docs.size(); ++i) {
    r->ReadDocument(i, &got);
    ASSERT_EQ(got, docs[i]) << "document " << i;
    EXPECT_EQ(r->document_start(i), total);
    EXPECT_EQ(static_cast<uint32_t>(docs[i].back()), r->token(total + docs[i].size() - 1));
    total += docs[i].size();
  }
  EXPECT_EQ(r->token_count(), total);
  // Header fields sit where docs/data.md says.
  const std::string bytes = ReadBytes(path);
  EXPECT_EQ(bytes.substr(0, 8), "XVTOKSH1");
  uint64_t tokens_in_header = 0;
  std::memcpy(&tokens_in_header, bytes.data() + kShardOffTokenCount, 8);
  EXPECT_EQ(tokens_in_header, total);
  EXPECT_EQ(bytes.size(), r->file_size());
}

TEST(TokenShard, RoundTripUint16) {
  ScopedTempDir dir;
  ExpectRoundTrip(dir.File("a.xvt"), 8192, 2);
  ExpectRoundTrip(dir.File("b.xvt"), 65536, 2);
  EXPECT_EQ(EntriesIn(dir.path()), 2u);  // no temporary files left
}

TEST(TokenShard, RoundTripUint32WhenVocabExceedsUint16) {
  ScopedTempDir dir;
  ExpectRoundTrip(dir.File("big.xvt"), 100000, 4);
}

TEST(TokenShard, EmptyShardRoundTrips) {
  ScopedTempDir dir;
  ASSERT_TRUE(WriteTokenShard(dir.File("e.xvt"), 300, {}).ok());
  std::unique_ptr<TokenShardReader> r;
  ASSERT_TRUE(TokenShardReader::Open(dir.File("e.xvt"), &r).ok());
  EXPECT_EQ(r->document_count(), 0u);
  EXPECT_EQ(r->token_count(), 0u);
}

// A shard of ~200 KB: several 64 KiB checksum blocks.
std::string WriteMultiBlockShard(const ScopedTempDir& dir) {
  const std::string path = dir.File("shard.xvt");
  EXPECT_TRUE(WriteTokenShard(path, 600, RandomDocuments(300, 700, 600, 3)).ok());
  EXPECT_GT(ReadBytes(path).size(), 3u * kShardBlockSize);
  return path;
}

Status OpenFull(const std::string& path) {
  std::unique_ptr<TokenShardReader> r;
  return TokenShardReader::Open(path, &r, ShardVerify::kFull);
}

TEST(TokenShard, FlippedByteNamesFileAndBlockOffset) {
  ScopedTempDir dir;
  const std::string path = WriteMultiBlockShard(dir);
  std::string bytes = ReadBytes(path);
  bytes[150000] ^= 0x10;  // inside block 2, which starts at 131072
  WriteBytes(path, bytes);
  Status st = OpenFull(path);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Status::Code::kDataLoss);
  EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("offset 131072"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("checksum mismatch"), std::string::npos) << st.message();
  // The structure-only check does not read the token blocks, so it still opens.
  std::unique_ptr<TokenShardReader> r;
  EXPECT_TRUE(TokenShardReader::Open(path, &r, ShardVerify::kStructure).ok());
}

TEST(TokenShard, FlippedByteInOffsetTableIsCaught) {
  ScopedTempDir dir;
  const std::string path = WriteMultiBlockShard(dir);
  std::string bytes = ReadBytes(path);
  uint64_t offsets_offset = 0;
  std::memcpy(&offsets_offset, bytes.data() + kShardOffOffsets, 8);
  bytes[offsets_offset + 8 * 5] ^= 0x01;
  WriteBytes(path, bytes);
  Status st = OpenFull(path);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("checksum mismatch"), std::string::npos) << st.message();
}

TEST(TokenShard, TruncatedShardNamesFileAndOffset) {
  ScopedTempDir dir;
  const std::string path = WriteMultiBlockShard(dir);
  const std::string bytes = ReadBytes(path);
  WriteBytes(path, bytes.substr(0, bytes.size() - 100));
  Status st = OpenFull(path);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Status::Code::kDataLoss);
  EXPECT_NE(st.message().find(path + ": offset " + std::to_string(bytes.size() - 100)),
            std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("truncated"), std::string::npos) << st.message();

  WriteBytes(path, bytes.substr(0, 10));  // not even a header
  st = OpenFull(path);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(path + ": offset 10: truncated"), std::string::npos) << st.message();
}

TEST(TokenShard, TrailingBytesAreAnError) {
  ScopedTempDir dir;
  const std::string path = WriteMultiBlockShard(dir);
  const std::string bytes = ReadBytes(path);
  WriteBytes(path, bytes + "x");
  Status st = OpenFull(path);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("offset " + std::to_string(bytes.size())), std::string::npos)
      << st.message();
}

TEST(TokenShard, WrongMagicNamesOffsetZero) {
  ScopedTempDir dir;
  const std::string path = WriteMultiBlockShard(dir);
  std::string bytes = ReadBytes(path);
  bytes[3] = 'X';
  WriteBytes(path, bytes);
  Status st = OpenFull(path);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(path + ": offset 0: bad magic"), std::string::npos) << st.message();

  const std::string text = dir.File("notes.txt");
  WriteBytes(text, std::string(200, 'a'));
  st = OpenFull(text);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("not an xv token shard"), std::string::npos) << st.message();
}

TEST(TokenShard, CorruptedHeaderIsCaughtByItsChecksum) {
  ScopedTempDir dir;
  const std::string path = WriteMultiBlockShard(dir);
  std::string bytes = ReadBytes(path);
  bytes[kShardOffDocumentCount] ^= 0x04;
  WriteBytes(path, bytes);
  Status st = OpenFull(path);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("header checksum mismatch"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("offset 60"), std::string::npos) << st.message();
}

// Rewrites a header field and its checksum, as a writer with a bug would.
void PatchHeaderU32(std::string* bytes, uint32_t offset, uint32_t value) {
  std::memcpy(bytes->data() + offset, &value, 4);
  const uint32_t crc = static_cast<uint32_t>(
      crc32(0L, reinterpret_cast<const Bytef*>(bytes->data()), kShardOffHeaderCrc));
  std::memcpy(bytes->data() + kShardOffHeaderCrc, &crc, 4);
}

TEST(TokenShard, VocabLargerThanTokenDtypeIsAnError) {
  ScopedTempDir dir;
  const std::string path = WriteMultiBlockShard(dir);
  std::string bytes = ReadBytes(path);
  PatchHeaderU32(&bytes, kShardOffVocabSize, 70000);  // uint16 ids cannot cover 70000
  WriteBytes(path, bytes);
  Status st = OpenFull(path);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(path + ": offset 12: vocab size 70000 does not fit"),
            std::string::npos)
      << st.message();
}

TEST(TokenShard, UnsupportedVersionIsNamed) {
  ScopedTempDir dir;
  const std::string path = WriteMultiBlockShard(dir);
  std::string bytes = ReadBytes(path);
  PatchHeaderU32(&bytes, kShardOffVersion, 7);
  WriteBytes(path, bytes);
  Status st = OpenFull(path);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("offset 8: unsupported shard version 7"), std::string::npos)
      << st.message();
}

// Every single-byte change and every truncation of a small shard is reported, never accepted.
TEST(TokenShard, EveryFlippedByteAndEveryTruncationIsDetected) {
  ScopedTempDir dir;
  const std::string path = dir.File("small.xvt");
  ASSERT_TRUE(WriteTokenShard(path, 300, {{0, 5, 299, 17}, {0, 1}, {0, 250, 251}}).ok());
  const std::string good = ReadBytes(path);
  ASSERT_TRUE(OpenFull(path).ok());
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] ^= 0x01;
    WriteBytes(path, bad);
    Status st = OpenFull(path);
    ASSERT_FALSE(st.ok()) << "flipped byte " << i << " was not detected";
    ASSERT_EQ(st.code(), Status::Code::kDataLoss) << st.ToString();
    ASSERT_EQ(st.message().rfind(path + ": offset ", 0), 0u) << st.message();
  }
  for (size_t n = 0; n < good.size(); ++n) {
    WriteBytes(path, good.substr(0, n));
    Status st = OpenFull(path);
    ASSERT_FALSE(st.ok()) << "truncation to " << n << " bytes was not detected";
    ASSERT_EQ(st.message().rfind(path + ": offset ", 0), 0u) << st.message();
  }
}

TEST(TokenShard, MissingShardIsNotFound) {
  ScopedTempDir dir;
  Status st = OpenFull(dir.File("nope.xvt"));
  EXPECT_EQ(st.code(), Status::Code::kNotFound);
  EXPECT_NE(st.message().find("nope.xvt"), std::string::npos);
}

TEST(TokenShardWriter, RejectsIdsOutsideTheVocabAndLeavesNothingBehind) {
  ScopedTempDir dir;
  std::unique_ptr<TokenShardWriter> w;
  ASSERT_TRUE(TokenShardWriter::Create(dir.File("s.xvt"), 300, &w).ok());
  ASSERT_TRUE(w->AddDocument({0, 1, 299}).ok());
  Status st = w->AddDocument({5, 300});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("document 1 position 1: token id 300 outside [0, 300)"),
            std::string::npos)
      << st.message();
  EXPECT_FALSE(w->Finish().ok());
  w.reset();
  EXPECT_EQ(EntriesIn(dir.path()), 0u);
}

TEST(TokenShardWriter, AbandonedWriterLeavesNoFile) {
  ScopedTempDir dir;
  {
    std::unique_ptr<TokenShardWriter> w;
    ASSERT_TRUE(TokenShardWriter::Create(dir.File("s.xvt"), 300, &w).ok());
    ASSERT_TRUE(w->AddDocument({0, 1, 2}).ok());
    EXPECT_EQ(EntriesIn(dir.path()), 1u);  // the temporary file
    EXPECT_FALSE(std::filesystem::exists(dir.File("s.xvt")));
  }
  EXPECT_EQ(EntriesIn(dir.path()), 0u);
}

TEST(TokenShardWriter, RejectsBadVocab) {
  ScopedTempDir dir;
  std::unique_ptr<TokenShardWriter> w;
  EXPECT_EQ(TokenShardWriter::Create(dir.File("s.xvt"), 0, &w).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(TokenShardWriter::Create(dir.File("s.xvt"), uint64_t{1} << 33, &w).code(),
            Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace xv::tok
