// `xvctl prepare` end to end on a small corpus written here (fortune text, JSON lines, gzip, zstd):
// the data directory opens, every document comes back from the shards exactly once (BOS first,
// decoding to the original text), a second run is "up to date", changes redo it, failures leave
// nothing behind.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <random>

#include <gtest/gtest.h>
#include <CLI/CLI.hpp>

#include "tests/unit/fixtures/scoped_temp_dir.h"
#include "tests/unit/tokenizer/compressed_fixtures.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/corpus_files.h"
#include "tokenizer/corpus_reader.h"
#include "tokenizer/prepare_command.h"
#include "tokenizer/prepare_run.h"
#include "tokenizer/token_shard_reader.h"
#include "tokenizer/token_shard_writer.h"
#include "trainer/data/data_dir.h"

namespace xv::tok {
namespace {

using ::xv::testing::Gzip;
using ::xv::testing::ReadBytes;
using ::xv::testing::ScopedTempDir;
using ::xv::testing::WriteBytes;
using ::xv::testing::Zstd;

const char* const kWords[] = {
    "the",  "cat",     "sat",      "on",    "a",       "mat", "while",  "fortune", "favours",
    "bold", "code",    "compiles", "never", "twice",   "42",  "tokens", "über",    "naïve",
    "日本", "emoji 😀", "don't",    "we'll", "(maybe)", "--",  "quite",  "so",      "interesting."};

std::string RandomDocument(std::mt19937* rng) {
  std::string doc;
  const int lines = 1 + static_cast<int>((*rng)() % 4);
  for (int l = 0; l < lines; ++l) {
    if (l > 0) doc += "\n";
    const int words = 3 + static_cast<int>((*rng)() % 12);
    for (int w = 0; w < words; ++w) {
      if (w > 0) doc += " ";
      doc += kWords[(*rng)() % (sizeof(kWords) / sizeof(kWords[0]))];
    }
  }
  return doc;
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

// Writes four files of 60 documents each; returns every document in corpus order.
std::vector<std::string> WriteCorpus(const std::string& dir) {
  std::mt19937 rng(1234);
  std::vector<std::string> all;
  std::string fortunes, blank, jsonl, jsonl2;
  for (int i = 0; i < 60; ++i) {
    std::string d = RandomDocument(&rng);
    fortunes += d + "\n%\n";
  }
  for (int i = 0; i < 60; ++i) blank += RandomDocument(&rng) + "\n\n";
  for (int i = 0; i < 60; ++i) jsonl += "{\"text\": " + JsonString(RandomDocument(&rng)) + "}\n";
  for (int i = 0; i < 60; ++i) jsonl2 += "{\"text\": " + JsonString(RandomDocument(&rng)) + "}\n";
  WriteBytes(dir + "/a-fortunes", fortunes);
  WriteBytes(dir + "/a-fortunes.dat", std::string("\x00\x00\x00\x02garbage", 11));
  WriteBytes(dir + "/b-paragraphs.txt.gz", Gzip(blank));
  WriteBytes(dir + "/c-docs.jsonl", jsonl);
  WriteBytes(dir + "/d-docs.jsonl.zst", Zstd(jsonl2));
  // Read it back the way prepare does, to know the documents.
  std::vector<CorpusFile> files;
  EXPECT_TRUE(ListCorpusFiles({dir}, &files, nullptr).ok());
  EXPECT_EQ(files.size(), 4u);
  for (const auto& f : files) EXPECT_TRUE(ReadCorpusDocuments(f, TextSeparator::kAuto, &all).ok());
  EXPECT_EQ(all.size(), 240u);
  return all;
}

PrepareOptions SmallOptions(const std::string& corpus, const std::string& out) {
  PrepareOptions o;
  o.inputs = {corpus};
  o.out_dir = out;
  o.vocab_size = 300;
  o.val_docs = 12;
  o.threads = 2;
  o.shard_tokens = 1500;  // several train shards
  o.progress = false;
  return o;
}

std::vector<std::string> DecodeShard(const BpeTokenizer& tok, const std::string& path,
                                     uint32_t bos) {
  std::unique_ptr<TokenShardReader> reader;
  Status st = TokenShardReader::Open(path, &reader);
  EXPECT_TRUE(st.ok()) << st.ToString();
  std::vector<std::string> docs;
  std::vector<int32_t> ids;
  for (uint64_t d = 0; d < reader->document_count(); ++d) {
    reader->ReadDocument(d, &ids);
    EXPECT_FALSE(ids.empty());
    EXPECT_EQ(static_cast<uint32_t>(ids[0]), bos) << path << " document " << d;
    std::vector<uint32_t> body(ids.begin() + 1, ids.end());
    std::string text;
    EXPECT_TRUE(tok.Decode(body, &text).ok());
    EXPECT_EQ(tok.EncodeOrdinary(text), body);
    docs.push_back(text);
  }
  return docs;
}

bool HasStagingLeftovers(const std::string& out) {
  if (!std::filesystem::exists(out)) return false;
  for (const auto& e : std::filesystem::directory_iterator(out)) {
    if (e.path().filename().string().rfind(".prepare-staging", 0) == 0) return true;
  }
  return false;
}

TEST(Prepare, BuildsADataDirectoryHoldingEveryDocumentOnce) {
  ScopedTempDir tmp;
  const std::string corpus = tmp.File("corpus"), out = tmp.File("data");
  const std::vector<std::string> docs = WriteCorpus(corpus);
  PrepareResult result;
  Status st = RunPrepare(SmallOptions(corpus, out), &result);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_FALSE(result.up_to_date);
  EXPECT_EQ(result.input_files, 4);
  EXPECT_EQ(result.documents, 240);
  EXPECT_EQ(result.val_documents, 12);
  EXPECT_EQ(result.train_documents, 228);
  EXPECT_GT(result.train_shards, 1);
  EXPECT_FALSE(HasStagingLeftovers(out));

  std::unique_ptr<data::DataDir> dir;
  st = data::DataDir::Open(out, &dir);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(dir->vocab_size(), 300u);
  EXPECT_EQ(dir->bos_id(), 296u);  // 296 ranks, then <|reserved_0..3|>
  ASSERT_EQ(dir->token_bytes().size(), 300u);
  EXPECT_EQ(dir->token_bytes()[296], 0);
  EXPECT_EQ(dir->token_bytes()['a'], 1);
  EXPECT_EQ(static_cast<int64_t>(dir->train_shards().size()), result.train_shards);

  std::unique_ptr<BpeTokenizer> tok;
  st = BpeTokenizer::Load(dir->ranks_path(), dir->tokenizer_json_path(), &tok);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(tok->vocab_size(), 300u);
  std::vector<std::string> from_shards = DecodeShard(*tok, dir->val_shard(), dir->bos_id());
  EXPECT_EQ(from_shards.size(), 12u);
  int64_t train_tokens = 0;
  for (const auto& shard : dir->train_shards()) {
    auto part = DecodeShard(*tok, shard, dir->bos_id());
    from_shards.insert(from_shards.end(), part.begin(), part.end());
    std::unique_ptr<TokenShardReader> reader;
    ASSERT_TRUE(TokenShardReader::Open(shard, &reader).ok());
    train_tokens += static_cast<int64_t>(reader->token_count());
  }
  EXPECT_EQ(train_tokens, result.train_tokens);
  std::vector<std::string> expected = docs;
  std::sort(expected.begin(), expected.end());
  std::sort(from_shards.begin(), from_shards.end());
  EXPECT_EQ(from_shards, expected);

  // The trainer's view: packed rows of T+1 tokens starting with BOS, from both splits.
  data::BestFitPackerOptions po;
  po.batch_size = 2;
  po.seq_len = 64;
  for (data::Split split : {data::Split::kTrain, data::Split::kVal}) {
    std::unique_ptr<data::PrefetchingBatchLoader> loader;
    st = dir->OpenLoader(split, po, 2, &loader);
    ASSERT_TRUE(st.ok()) << st.ToString();
    data::PackedBatch batch;
    for (int i = 0; i < 5; ++i) {
      ASSERT_TRUE(loader->Next(&batch).ok());
      ASSERT_EQ(batch.tokens.size(), 130u);
      EXPECT_EQ(static_cast<uint32_t>(batch.tokens[0]), dir->bos_id());
      EXPECT_EQ(static_cast<uint32_t>(batch.tokens[65]), dir->bos_id());
      for (int32_t id : batch.tokens) ASSERT_LT(static_cast<uint32_t>(id), 300u);
    }
  }
}

TEST(Prepare, SecondRunIsUpToDateAndChangesRedoIt) {
  ScopedTempDir tmp;
  const std::string corpus = tmp.File("corpus"), out = tmp.File("data");
  WriteCorpus(corpus);
  PrepareOptions o = SmallOptions(corpus, out);
  PrepareResult r1, r2;
  ASSERT_TRUE(RunPrepare(o, &r1).ok());
  EXPECT_EQ(r1.reason, "no prepare.json");
  const std::string manifest = ReadBytes(out + "/prepare.json");
  const std::string val = ReadBytes(out + "/shards/val-00000.xvt");
  ASSERT_TRUE(RunPrepare(o, &r2).ok());
  EXPECT_TRUE(r2.up_to_date);
  EXPECT_EQ(ReadBytes(out + "/prepare.json"), manifest);

  // Same inputs and options, forced: identical output (deterministic), redone.
  PrepareOptions forced = o;
  forced.force = true;
  PrepareResult r3;
  ASSERT_TRUE(RunPrepare(forced, &r3).ok());
  EXPECT_FALSE(r3.up_to_date);
  EXPECT_EQ(r3.reason, "--force");
  EXPECT_EQ(ReadBytes(out + "/shards/val-00000.xvt"), val);

  // Another option.
  PrepareOptions other = o;
  other.val_docs = 20;
  PrepareResult r4;
  ASSERT_TRUE(RunPrepare(other, &r4).ok());
  EXPECT_EQ(r4.reason, "options changed");
  EXPECT_EQ(r4.val_documents, 20);

  // A changed input (size and mtime).
  WriteBytes(corpus + "/c-docs.jsonl",
             ReadBytes(corpus + "/c-docs.jsonl") + "{\"text\": \"new\"}\n");
  PrepareResult r5;
  ASSERT_TRUE(RunPrepare(other, &r5).ok());
  EXPECT_EQ(r5.reason, "inputs changed");
  EXPECT_EQ(r5.documents, 241);

  // A damaged output.
  std::string shard = ReadBytes(out + "/shards/train-00000.xvt");
  shard[100] ^= 1;
  WriteBytes(out + "/shards/train-00000.xvt", shard);
  PrepareResult r6;
  ASSERT_TRUE(RunPrepare(other, &r6).ok());
  EXPECT_EQ(r6.reason, "output shards/train-00000.xvt changed (size or crc32)");
  PrepareResult r7;
  ASSERT_TRUE(RunPrepare(other, &r7).ok());
  EXPECT_TRUE(r7.up_to_date);

  // A stray shard the trainer would read.
  ASSERT_TRUE(WriteTokenShard(out + "/shards/train-00099.xvt", 300, {{0, 1}}).ok());
  PrepareResult r8;
  ASSERT_TRUE(RunPrepare(other, &r8).ok());
  EXPECT_EQ(r8.reason, "unexpected file shards/train-00099.xvt");
  EXPECT_FALSE(std::filesystem::exists(out + "/shards/train-00099.xvt"));
}

TEST(Prepare, InvalidUtf8FailsNamingFileAndOffsetAndKeepsTheOldOutput) {
  ScopedTempDir tmp;
  const std::string corpus = tmp.File("corpus"), out = tmp.File("data");
  WriteCorpus(corpus);
  PrepareOptions o = SmallOptions(corpus, out);
  ASSERT_TRUE(RunPrepare(o, nullptr).ok());
  const std::string manifest = ReadBytes(out + "/prepare.json");
  WriteBytes(corpus + "/e-bad.txt", "fine\n%\nnot \xC3\x28 fine\n");
  Status st = RunPrepare(o, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(corpus + "/e-bad.txt: invalid UTF-8 at byte offset 11"),
            std::string::npos)
      << st.message();
  EXPECT_EQ(ReadBytes(out + "/prepare.json"), manifest);
  EXPECT_FALSE(HasStagingLeftovers(out));
  std::unique_ptr<data::DataDir> dir;
  EXPECT_TRUE(data::DataDir::Open(out, &dir).ok());
}

TEST(Prepare, FailureInAFreshDirectoryLeavesNoDataBehind) {
  ScopedTempDir tmp;
  const std::string out = tmp.File("data");
  WriteBytes(tmp.File("one.txt"), "just one document\n");
  Status st = RunPrepare(SmallOptions(tmp.File("one.txt"), out), nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("at least 2"), std::string::npos) << st.message();
  EXPECT_FALSE(std::filesystem::exists(out));
}

// The `xvctl prepare` command line: flags reach RunPrepare, progress lines with MB/s go to stderr
// (not a terminal here), and the second run prints "up to date".
std::string RunPrepareCommand(const std::vector<std::string>& args, std::string* err) {
  CLI::App app{"xvctl"};
  AddPrepareCommand(&app);
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  app.parse(reversed);
  *err = ::testing::internal::GetCapturedStderr();
  return ::testing::internal::GetCapturedStdout();
}

TEST(PrepareCommand, RunsAndReportsUpToDate) {
  ScopedTempDir tmp;
  const std::string corpus = tmp.File("corpus"), out = tmp.File("data");
  WriteCorpus(corpus);
  const std::vector<std::string> args = {"prepare", "--input",      corpus, "--out",
                                         out,       "--vocab-size", "280",  "--val-fraction",
                                         "0.1",     "--threads",    "2"};
  std::string err;
  std::string first = RunPrepareCommand(args, &err);
  EXPECT_NE(first.find("prepared " + out + " (no prepare.json): 4 files (1 skipped)"),
            std::string::npos)
      << first;
  EXPECT_NE(first.find("240 documents -> vocab 280"), std::string::npos) << first;
  EXPECT_NE(first.find("(24 docs)"), std::string::npos) << first;  // 10% of 240 for validation
  EXPECT_NE(err.find("encode: 100.0%"), std::string::npos) << err;
  EXPECT_NE(err.find("MB/s"), std::string::npos) << err;
  std::string second = RunPrepareCommand(args, &err);
  EXPECT_EQ(second.rfind("up to date: " + out, 0), 0u) << second;
  std::unique_ptr<data::DataDir> dir;
  ASSERT_TRUE(data::DataDir::Open(out, &dir).ok());
  EXPECT_EQ(dir->vocab_size(), 280u);
  // --val-docs and --val-fraction exclude each other.
  CLI::App app{"xvctl"};
  AddPrepareCommand(&app);
  std::vector<std::string> bad = {"1",     "--val-fraction", "3",       "--val-docs", out,
                                  "--out", corpus,           "--input", "prepare"};
  EXPECT_THROW(app.parse(bad), CLI::ParseError);
}

TEST(Prepare, BadOptionsNameTheFlag) {
  PrepareOptions o;
  o.inputs = {"x"};
  o.out_dir = "y";
  o.vocab_size = 100;
  Status st = RunPrepare(o, nullptr);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("--vocab-size"), std::string::npos);
  o.vocab_size = 300;
  o.val_fraction = 1.5;
  EXPECT_NE(RunPrepare(o, nullptr).message().find("--val-fraction"), std::string::npos);
}

TEST(DataDir, MissingPiecesAreNamed) {
  ScopedTempDir tmp;
  std::unique_ptr<data::DataDir> dir;
  Status st = data::DataDir::Open(tmp.path(), &dir);
  EXPECT_EQ(st.code(), Status::Code::kNotFound);
  EXPECT_NE(st.message().find("xvctl prepare"), std::string::npos) << st.message();

  const std::string corpus = tmp.File("corpus"), out = tmp.File("data");
  WriteCorpus(corpus);
  ASSERT_TRUE(RunPrepare(SmallOptions(corpus, out), nullptr).ok());
  std::filesystem::remove(out + "/shards/val-00000.xvt");
  st = data::DataDir::Open(out, &dir);
  EXPECT_NE(st.message().find("val-00000.xvt: the pinned validation shard is missing"),
            std::string::npos)
      << st.message();
  // A shard whose vocab differs from the tokenizer's.
  ASSERT_TRUE(WriteTokenShard(out + "/shards/val-00000.xvt", 512, {{0, 1, 2}}).ok());
  st = data::DataDir::Open(out, &dir);
  EXPECT_EQ(st.code(), Status::Code::kDataLoss);
  EXPECT_NE(st.message().find("vocab size 512 does not match the tokenizer's 300"),
            std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace xv::tok
