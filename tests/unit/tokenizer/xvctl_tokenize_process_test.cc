// `xvctl tokenize` as a real process: the reference test strings in, tiktoken's ids out, and back.
#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "reference_fixture.h"

namespace xv::tok {
namespace {

using testing::ReadFileOrEmpty;
using testing::ReadReferenceJson;
using testing::ReferenceDir;

// Runs `command` with stdin from `input`; returns its exit status and stdout.
int RunWithInput(const std::string& command, const std::string& input, std::string* output) {
  const std::string dir = ::testing::TempDir();
  const std::string in_path = dir + "xvctl_tokenize_in_" + std::to_string(::getpid());
  const std::string out_path = in_path + ".out";
  std::ofstream(in_path, std::ios::binary) << input;
  const int status = std::system((command + " < " + in_path + " > " + out_path + " 2>&1").c_str());
  *output = ReadFileOrEmpty(out_path);
  std::remove(in_path.c_str());
  std::remove(out_path.c_str());
  return status;
}

TEST(XvctlTokenizeProcess, GivesReferenceIdsAndDecodesBack) {
  auto ref = ReadReferenceJson();
  std::string input;
  for (const auto& t : ref["tests"]) input += nlohmann::json{{"text", t["text"]}}.dump() + "\n";
  const std::string base = std::string(XVCTL_PATH) + " tokenize --ranks " + ReferenceDir() +
                           "/tokenizer_ref.tiktoken --meta " + ReferenceDir() +
                           "/tokenizer_ref.json";
  std::string output;
  ASSERT_EQ(RunWithInput(base, input, &output), 0) << output;
  std::stringstream lines(output);
  std::string line, ids_input;
  size_t i = 0;
  while (std::getline(lines, line)) {
    ASSERT_LT(i, ref["tests"].size()) << output;
    EXPECT_EQ(nlohmann::json::parse(line)["ids"], ref["tests"][i]["ids"]) << "test string " << i;
    ids_input += line + "\n";
    ++i;
  }
  EXPECT_EQ(i, ref["tests"].size());

  ASSERT_EQ(RunWithInput(base + " --decode", ids_input, &output), 0) << output;
  std::stringstream decoded(output);
  i = 0;
  while (std::getline(decoded, line)) {
    EXPECT_EQ(nlohmann::json::parse(line)["text"], ref["tests"][i]["text"]);
    ++i;
  }
  EXPECT_EQ(i, ref["tests"].size());
}

TEST(XvctlTokenizeProcess, BadLineExitsNonZeroNamingTheLine) {
  const std::string base =
      std::string(XVCTL_PATH) + " tokenize --ranks " + ReferenceDir() + "/tokenizer_ref.tiktoken";
  std::string output;
  const int status = RunWithInput(base, "{\"text\": \"a\"}\n{\"txt\": 1}\n", &output);
  EXPECT_NE(status, 0);
  EXPECT_NE(output.find("line 2"), std::string::npos) << output;
}

}  // namespace
}  // namespace xv::tok
