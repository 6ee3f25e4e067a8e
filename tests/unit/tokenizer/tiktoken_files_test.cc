// Ranks files (tiktoken text format), tokenizer.json and token_bytes.json: round trips against the
// reference file and clear errors for bad input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "reference_fixture.h"
#include "tokenizer/tiktoken_metadata.h"
#include "tokenizer/tiktoken_ranks.h"

namespace xv::tok {
namespace {

namespace fs = std::filesystem;
using testing::ReadFileOrEmpty;
using testing::ReferenceDir;

class TiktokenFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("xv_tok_files_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST(Base64, KnownVectors) {
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(Base64Encode("f"), "Zg==");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(Base64Encode("foo"), "Zm9v");
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(Base64Encode(std::string("\x00\xff", 2)), "AP8=");
  std::string out;
  ASSERT_TRUE(Base64Decode("Zm9vYmE=", &out).ok());
  EXPECT_EQ(out, "fooba");
  EXPECT_FALSE(Base64Decode("Zm9", &out).ok());
  EXPECT_FALSE(Base64Decode("Zm=v", &out).ok());
  EXPECT_FALSE(Base64Decode("Zm9*", &out).ok());
}

TEST_F(TiktokenFilesTest, ReferenceRanksRoundTripByteForByte) {
  const std::string ref_path = ReferenceDir() + "/tokenizer_ref.tiktoken";
  TokenRanks ranks;
  Status st = ReadTiktokenRanks(ref_path, &ranks);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(ranks.size(), 600u);
  EXPECT_EQ(ranks[0], std::string(1, '\0'));
  EXPECT_EQ(ranks[255], std::string(1, '\xff'));
  ASSERT_TRUE(WriteTiktokenRanks(Path("out.tiktoken"), ranks).ok());
  EXPECT_EQ(ReadFileOrEmpty(Path("out.tiktoken")), ReadFileOrEmpty(ref_path));
  // Nothing but the file itself is left in the directory (no temp file).
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST(TiktokenRanks, ErrorsNameTheLine) {
  TokenRanks ranks;
  Status st = ParseTiktokenRanks("AA== 0\nAQ== 1\nAA== 2\n", "x.tiktoken", &ranks);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("x.tiktoken:3: duplicate token"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("line 1"), std::string::npos) << st.message();

  st = ParseTiktokenRanks("AA== 0\nAQ== 2\n", "x.tiktoken", &ranks);
  EXPECT_NE(st.message().find("x.tiktoken:2: rank 2 where rank 1"), std::string::npos)
      << st.message();
  st = ParseTiktokenRanks("AA== 0\nA*== 1\n", "x.tiktoken", &ranks);
  EXPECT_NE(st.message().find("x.tiktoken:2: bad base64"), std::string::npos) << st.message();
  st = ParseTiktokenRanks("AA==0\n", "x.tiktoken", &ranks);
  EXPECT_NE(st.message().find("x.tiktoken:1: expected"), std::string::npos) << st.message();
  st = ParseTiktokenRanks("AA== 0x\n", "x.tiktoken", &ranks);
  EXPECT_NE(st.message().find("x.tiktoken:1: bad rank"), std::string::npos) << st.message();
  st = ParseTiktokenRanks("\n\n", "x.tiktoken", &ranks);
  EXPECT_NE(st.message().find("empty file"), std::string::npos) << st.message();
  st = ReadTiktokenRanks("/nonexistent/dir/r.tiktoken", &ranks);
  EXPECT_EQ(st.code(), Status::Code::kNotFound);
}

TEST_F(TiktokenFilesTest, TokenizerMetaRoundTripAndReadsReferenceJson) {
  TokenizerMeta meta;
  Status st = ReadTokenizerMeta(ReferenceDir() + "/tokenizer_ref.json", &meta);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(meta.n_ranks, 600u);
  EXPECT_EQ(meta.vocab_size, 604u);
  EXPECT_EQ(meta.bos_id, 600u);
  ASSERT_EQ(meta.specials.size(), 4u);
  EXPECT_EQ(meta.specials[3], "<|reserved_3|>");

  ASSERT_TRUE(WriteTokenizerMeta(Path("tokenizer.json"), meta).ok());
  TokenizerMeta again;
  ASSERT_TRUE(ReadTokenizerMeta(Path("tokenizer.json"), &again).ok());
  EXPECT_EQ(again.pattern, meta.pattern);
  EXPECT_EQ(again.specials, meta.specials);
  EXPECT_EQ(again.bos_id, 600u);
  EXPECT_EQ(again.vocab_size, 604u);
}

TEST_F(TiktokenFilesTest, TokenizerMetaErrorsNameTheField) {
  auto write = [&](const std::string& text) {
    std::FILE* f = std::fopen(Path("m.json").c_str(), "w");
    std::fputs(text.c_str(), f);
    std::fclose(f);
  };
  TokenizerMeta meta;
  write(R"({"special_tokens": {"<a>": 5}})");
  EXPECT_NE(ReadTokenizerMeta(Path("m.json"), &meta).message().find("pattern"), std::string::npos);
  write(R"({"pattern": "x", "special_tokens": {"<a>": 5, "<b>": 7}})");
  EXPECT_NE(ReadTokenizerMeta(Path("m.json"), &meta).message().find("special_tokens.<b>"),
            std::string::npos);
  write(R"({"pattern": "x", "special_tokens": {"<a>": 5}, "bos": "<z>"})");
  EXPECT_NE(ReadTokenizerMeta(Path("m.json"), &meta).message().find("bos"), std::string::npos);
  write(R"({"pattern": "x", )");
  EXPECT_NE(ReadTokenizerMeta(Path("m.json"), &meta).message().find("bad JSON"), std::string::npos);
}

TEST_F(TiktokenFilesTest, TokenBytesRoundTripAndErrors) {
  const std::vector<int32_t> lengths = {1, 1, 2, 5, 0, 0};
  ASSERT_TRUE(WriteTokenBytes(Path("token_bytes.json"), lengths).ok());
  std::vector<int32_t> read;
  ASSERT_TRUE(ReadTokenBytes(Path("token_bytes.json"), &read).ok());
  EXPECT_EQ(read, lengths);
  // The reference JSON's "token_bytes" field is accepted too.
  ASSERT_TRUE(ReadTokenBytes(ReferenceDir() + "/tokenizer_ref.json", &read).ok());
  EXPECT_EQ(read.size(), 604u);
  std::FILE* f = std::fopen(Path("bad.json").c_str(), "w");
  std::fputs("[1, 2, -3]", f);
  std::fclose(f);
  Status st = ReadTokenBytes(Path("bad.json"), &read);
  EXPECT_NE(st.message().find("token_bytes[2]"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace xv::tok
