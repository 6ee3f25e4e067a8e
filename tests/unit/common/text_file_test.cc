// ReadRegularFile on real files: a regular file whole, the refusals (missing, directory, FIFO
// without a writer, character device, over the limit) with their reasons, *out untouched on error.
#include "common/text_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace xv {
namespace {

class TextFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("xv-text-file-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  std::filesystem::path dir_;
};

TEST_F(TextFileTest, ReadsARegularFileWholeWithItsBytes) {
  const std::string text = std::string("depth: 2\n\0binary\r\n", 18) + std::string(70000, 'x');
  std::string out = "before";
  ASSERT_TRUE(ReadRegularFile(Write("r.yaml", text), 1 << 20, &out).ok());
  EXPECT_EQ(out, text);
  ASSERT_TRUE(ReadRegularFile(Write("empty", ""), 1 << 20, &out).ok());
  EXPECT_EQ(out, "");
}

TEST_F(TextFileTest, AFileAtTheLimitIsReadAndOneByteMoreIsRefused) {
  std::string out;
  ASSERT_TRUE(ReadRegularFile(Write("at", std::string(100, 'a')), 100, &out).ok());
  EXPECT_EQ(out.size(), 100u);
  out = "unchanged";
  const Status st = ReadRegularFile(Write("over", std::string(101, 'a')), 100, &out);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(st.message(), "101 bytes, over the limit of 100 bytes");
  EXPECT_EQ(out, "unchanged");
}

TEST_F(TextFileTest, RefusesWhatIsNotARegularFileSayingWhatItIs) {
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  std::filesystem::create_directories(dir_ / "sub");
  const std::pair<std::string, std::string> cases[] = {
      {(dir_ / "fifo").string(), "a FIFO; give a regular file"},  // no writer: must not block
      {(dir_ / "sub").string(), "a directory; give a regular file"},
      {"/dev/zero", "a character device; give a regular file"},
      {(dir_ / "absent").string(), "cannot open (No such file or directory)"},
  };
  for (const auto& [path, why] : cases) {
    std::string out = "unchanged";
    const Status st = ReadRegularFile(path, 1 << 20, &out);
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << path;
    EXPECT_EQ(st.message(), why) << path;
    EXPECT_EQ(st.message().find(path), std::string::npos) << "the caller names the path";
    EXPECT_EQ(out, "unchanged") << path;
  }
}

}  // namespace
}  // namespace xv
