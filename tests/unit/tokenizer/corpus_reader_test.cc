// Corpus reading: fortune (%) and blank-line text, JSON lines, gzip and zstd variants, directory
// walks (sorted, recursive, .dat skipped, symlinked duplicates read once), and errors naming the
// file and byte offset.
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/unit/fixtures/scoped_temp_dir.h"
#include "tests/unit/tokenizer/compressed_fixtures.h"
#include "tokenizer/corpus_decompress.h"
#include "tokenizer/corpus_files.h"
#include "tokenizer/corpus_reader.h"

namespace xv::tok {
namespace {

using ::testing::ElementsAre;
using ::xv::testing::Gzip;
using ::xv::testing::ScopedTempDir;
using ::xv::testing::WriteBytes;
using ::xv::testing::Zstd;

std::vector<std::string> Split(const std::string& text, TextSeparator sep) {
  std::vector<std::string> docs;
  SplitTextDocuments(text, sep, &docs);
  return docs;
}

TEST(CorpusText, FortuneFormatSplitsOnPercentLines) {
  const std::string text =
      "First fortune\n  indented line\n%\nSecond\n\nwith a blank line\n%\n%\n"
      "Third, no newline at end";
  EXPECT_THAT(Split(text, TextSeparator::kAuto),
              ElementsAre("First fortune\n  indented line", "Second\n\nwith a blank line",
                          "Third, no newline at end"));
  EXPECT_THAT(Split(text, TextSeparator::kPercent), Split(text, TextSeparator::kAuto));
  // "%" inside a line is text, and CRLF files work.
  EXPECT_THAT(Split("50% off\r\n%\r\nnext\r\n", TextSeparator::kAuto),
              ElementsAre("50% off", "next"));
}

TEST(CorpusText, BlankLinesSeparateWhenThereIsNoPercentLine) {
  const std::string text = "\n\npara one\nline two\n\n \t\n\npara two\n";
  EXPECT_THAT(Split(text, TextSeparator::kAuto), ElementsAre("para one\nline two", "para two"));
  // Forcing blank-line mode on a fortune file keeps "%" as text.
  EXPECT_THAT(Split("a\n%\nb\n\nc", TextSeparator::kBlankLine), ElementsAre("a\n%\nb", "c"));
}

TEST(CorpusText, SeparatorFlagParses) {
  TextSeparator sep;
  EXPECT_TRUE(ParseTextSeparator("blank", &sep).ok());
  EXPECT_EQ(sep, TextSeparator::kBlankLine);
  EXPECT_TRUE(ParseTextSeparator("percent", &sep).ok());
  EXPECT_EQ(sep, TextSeparator::kPercent);
  Status st = ParseTextSeparator("tab", &sep);
  EXPECT_NE(st.message().find("--txt-separator"), std::string::npos);
}

TEST(CorpusUtf8, FindsTheFirstInvalidByte) {
  EXPECT_EQ(FindInvalidUtf8("plain ascii text, long enough for the fast path"), std::string::npos);
  EXPECT_EQ(FindInvalidUtf8("caf\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x98\x80"),
            std::string::npos);
  EXPECT_EQ(FindInvalidUtf8("abcdefghij\xFFz"), 10u);
  EXPECT_EQ(FindInvalidUtf8("ab\xC0\xAF"), 2u);        // overlong '/'
  EXPECT_EQ(FindInvalidUtf8("ab\xED\xA0\x80"), 2u);    // surrogate U+D800
  EXPECT_EQ(FindInvalidUtf8("\xF4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(FindInvalidUtf8("abc\xE4\xBD"), 3u);       // truncated sequence
  EXPECT_EQ(FindInvalidUtf8("abc\xC3(x"), 3u);         // bad continuation
}

TEST(CorpusFiles, ReadsEveryFormatAndCompression) {
  ScopedTempDir dir;
  const std::string fortunes = "one\n%\ntwo\n%\n";
  const std::string jsonl =
      "{\"text\": \"json doc \\u00e9\", \"id\": 1}\n\n{\"text\": \"second\"}\n{\"text\": \"\"}\n";
  WriteBytes(dir.File("a.txt"), fortunes);
  WriteBytes(dir.File("b.jsonl"), jsonl);
  WriteBytes(dir.File("c.txt.gz"), Gzip("gz one\n\ngz two\n"));
  WriteBytes(dir.File("d.jsonl.zst"), Zstd("{\"text\": \"zstd doc\"}\n"));
  WriteBytes(dir.File("e.jsonl.gz"),
             Gzip("{\"text\": \"gz json\"}\n") + Gzip("{\"text\": \"m2\"}\n"));
  WriteBytes(dir.File("f.txt.zst"), Zstd("zst text\n%\nmore\n"));
  std::vector<CorpusFile> files;
  ASSERT_TRUE(ListCorpusFiles({dir.path()}, &files, nullptr).ok());
  ASSERT_EQ(files.size(), 6u);
  std::vector<std::string> docs;
  for (const auto& f : files) {
    Status st = ReadCorpusDocuments(f, TextSeparator::kAuto, &docs);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  EXPECT_THAT(docs, ElementsAre("one", "two", "json doc \xC3\xA9", "second", "gz one", "gz two",
                                "zstd doc", "gz json", "m2", "zst text", "more"));
}

TEST(CorpusFiles, DirectoryWalkIsSortedRecursiveAndSkipsIndexesAndDuplicates) {
  ScopedTempDir dir;
  WriteBytes(dir.File("corpus/zeta"), "z\n");
  WriteBytes(dir.File("corpus/alpha"), "a\n");
  WriteBytes(dir.File("corpus/alpha.dat"), std::string("\0\0\0\2", 4));
  WriteBytes(dir.File("corpus/sub/beta.txt"), "b\n");
  WriteBytes(dir.File("corpus/.hidden"), "h\n");
  WriteBytes(dir.File("corpus/README.md"), "r\n");
  ASSERT_EQ(::symlink("alpha", dir.File("corpus/alpha.u8").c_str()), 0);
  ASSERT_EQ(::symlink("sub", dir.File("corpus/sublink").c_str()), 0);
  ASSERT_EQ(::symlink("missing", dir.File("corpus/dangling").c_str()), 0);
  std::vector<CorpusFile> files;
  std::vector<std::string> skipped;
  ASSERT_TRUE(ListCorpusFiles({dir.File("corpus")}, &files, &skipped).ok());
  std::vector<std::string> paths;
  for (const auto& f : files) paths.push_back(f.path.substr(dir.path().size()));
  EXPECT_THAT(paths, ElementsAre("/corpus/alpha", "/corpus/sub/beta.txt", "/corpus/zeta"));
  EXPECT_EQ(skipped.size(), 5u);  // README.md, alpha.dat, alpha.u8 (same file), dangling, sublink
  EXPECT_GT(files[0].mtime_ns, 0);
  EXPECT_EQ(files[0].size, 2u);
}

// The demo corpus (Debian's fortunes package): extensionless fortune files are read, the strfile
// indexes (.dat) and the .u8 symlinks to the same files are not.
TEST(CorpusFiles, DebianFortunesDirectory) {
  const std::string dir = "/usr/share/games/fortunes";
  if (!std::filesystem::exists(dir + "/fortunes")) GTEST_SKIP() << dir << " not installed";
  std::vector<CorpusFile> files;
  std::vector<std::string> skipped;
  ASSERT_TRUE(ListCorpusFiles({dir}, &files, &skipped).ok());
  ASSERT_FALSE(files.empty());
  for (const auto& f : files) {
    EXPECT_EQ(f.path.find('.', dir.size()), std::string::npos) << f.path;
    EXPECT_EQ(f.format, CorpusFormat::kText);
  }
  for (const auto& s : skipped) {
    const bool dat = s.size() > 4 && s.compare(s.size() - 4, 4, ".dat") == 0;
    const bool u8 = s.size() > 3 && s.compare(s.size() - 3, 3, ".u8") == 0;
    EXPECT_TRUE(dat || u8) << s;
  }
  std::vector<std::string> docs;
  Status st = ReadCorpusDocuments(files[0], TextSeparator::kAuto, &docs);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_GT(docs.size(), 10u);
  for (const auto& d : docs) EXPECT_EQ(d.find("\n%\n"), std::string::npos);
}

TEST(CorpusFiles, ExplicitFilesKeepCommandLineOrder) {
  ScopedTempDir dir;
  WriteBytes(dir.File("b.log"), "x\n");
  WriteBytes(dir.File("a.txt"), "y\n");
  std::vector<CorpusFile> files;
  ASSERT_TRUE(ListCorpusFiles({dir.File("b.log"), dir.File("a.txt")}, &files, nullptr).ok());
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].path, dir.File("b.log"));
  Status st = ListCorpusFiles({dir.File("none.txt")}, &files, nullptr);
  EXPECT_EQ(st.code(), Status::Code::kNotFound);
  EXPECT_NE(st.message().find("none.txt"), std::string::npos);
}

Status ReadOne(const std::string& path, std::vector<std::string>* docs) {
  std::vector<CorpusFile> files;
  XV_RETURN_IF_ERROR(ListCorpusFiles({path}, &files, nullptr));
  return ReadCorpusDocuments(files[0], TextSeparator::kAuto, docs);
}

TEST(CorpusErrors, InvalidUtf8NamesFileAndByteOffset) {
  ScopedTempDir dir;
  WriteBytes(dir.File("bad.txt"), "good line\n%\nbad \xFF here\n");
  std::vector<std::string> docs;
  Status st = ReadOne(dir.File("bad.txt"), &docs);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find(dir.File("bad.txt") + ": invalid UTF-8 at byte offset 16"),
            std::string::npos)
      << st.message();
  WriteBytes(dir.File("bad.txt.gz"), Gzip("ok\n\xC3"));
  st = ReadOne(dir.File("bad.txt.gz"), &docs);
  EXPECT_NE(st.message().find("byte offset 3 of the decompressed data"), std::string::npos)
      << st.message();
}

TEST(CorpusErrors, EmptyInputsAreErrors) {
  ScopedTempDir dir;
  WriteBytes(dir.File("empty.txt"), "");
  WriteBytes(dir.File("blank.txt"), "\n\n  \n%\n");
  std::vector<std::string> docs;
  Status st = ReadOne(dir.File("empty.txt"), &docs);
  EXPECT_NE(st.message().find("empty.txt: empty input file"), std::string::npos) << st.message();
  st = ReadOne(dir.File("blank.txt"), &docs);
  EXPECT_NE(st.message().find("blank.txt: no documents"), std::string::npos) << st.message();
  std::filesystem::create_directories(dir.File("nothing"));
  std::vector<CorpusFile> files;
  st = ListCorpusFiles({dir.File("nothing")}, &files, nullptr);
  EXPECT_NE(st.message().find("no input files"), std::string::npos) << st.message();
}

TEST(CorpusErrors, JsonlErrorsNameTheLine) {
  ScopedTempDir dir;
  WriteBytes(dir.File("a.jsonl"), "{\"text\": \"ok\"}\n{\"txt\": \"oops\"}\n");
  std::vector<std::string> docs;
  Status st = ReadOne(dir.File("a.jsonl"), &docs);
  EXPECT_NE(st.message().find("a.jsonl:2 (byte offset 15): missing field \"text\""),
            std::string::npos)
      << st.message();
  WriteBytes(dir.File("b.jsonl"), "{\"text\": 5}\n");
  EXPECT_NE(ReadOne(dir.File("b.jsonl"), &docs).message().find("not a string"), std::string::npos);
  WriteBytes(dir.File("c.jsonl"), "{\"text\": \"unterminated}\n");
  EXPECT_NE(ReadOne(dir.File("c.jsonl"), &docs).message().find("c.jsonl:1"), std::string::npos);
}

TEST(CorpusErrors, CorruptAndTruncatedCompressedData) {
  ScopedTempDir dir;
  const std::string text(5000, 'q');
  std::string gz = Gzip(text + "\n");
  WriteBytes(dir.File("t.txt.gz"), gz.substr(0, gz.size() / 2));
  std::vector<std::string> docs;
  Status st = ReadOne(dir.File("t.txt.gz"), &docs);
  EXPECT_EQ(st.code(), Status::Code::kDataLoss);
  EXPECT_NE(st.message().find("t.txt.gz: truncated gzip"), std::string::npos) << st.message();
  gz[12] ^= 0x55;
  gz[13] ^= 0x55;
  WriteBytes(dir.File("c.txt.gz"), gz);
  st = ReadOne(dir.File("c.txt.gz"), &docs);
  EXPECT_EQ(st.code(), Status::Code::kDataLoss);
  EXPECT_NE(st.message().find("c.txt.gz"), std::string::npos) << st.message();

  std::string zst = Zstd(text);
  WriteBytes(dir.File("t.txt.zst"), zst.substr(0, zst.size() - 3));
  st = ReadOne(dir.File("t.txt.zst"), &docs);
  EXPECT_EQ(st.code(), Status::Code::kDataLoss);
  EXPECT_NE(st.message().find("t.txt.zst: truncated zstd"), std::string::npos) << st.message();
  WriteBytes(dir.File("x.txt.zst"), "definitely not zstd");
  st = ReadOne(dir.File("x.txt.zst"), &docs);
  EXPECT_NE(st.message().find("x.txt.zst: corrupt zstd data at compressed byte offset 0"),
            std::string::npos)
      << st.message();
}

TEST(CorpusErrors, ParquetSaysHowToConvert) {
  ScopedTempDir dir;
  WriteBytes(dir.File("shard_00000.parquet"), "PAR1....PAR1");
  std::vector<std::string> docs;
  Status st = ReadOne(dir.File("shard_00000.parquet"), &docs);
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("Apache Arrow"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("pyarrow"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace xv::tok
