// RunTokenize (the work behind `xvctl tokenize`): reference ids for every test string, --decode,
// and errors that name the stdin line.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <sstream>

#include "reference_fixture.h"
#include "tokenizer/tokenize_command.h"

namespace xv::tok {
namespace {

using testing::ReadReferenceJson;
using testing::ReferenceDir;

TokenizeOptions ReferenceOptions(bool decode) {
  TokenizeOptions options;
  options.ranks_path = ReferenceDir() + "/tokenizer_ref.tiktoken";
  options.meta_path = ReferenceDir() + "/tokenizer_ref.json";
  options.decode = decode;
  return options;
}

TEST(TokenizeCommand, EncodesEveryReferenceStringAndDecodesBack) {
  auto ref = ReadReferenceJson();
  std::stringstream in, out;
  for (const auto& t : ref["tests"]) in << nlohmann::json{{"text", t["text"]}}.dump() << "\n\n";
  Status st = RunTokenize(ReferenceOptions(false), in, out);
  ASSERT_TRUE(st.ok()) << st.ToString();
  std::string line;
  std::stringstream ids_lines;
  size_t i = 0;
  while (std::getline(out, line)) {
    ASSERT_LT(i, ref["tests"].size());
    auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j["ids"], ref["tests"][i]["ids"]) << "test string " << i;
    ids_lines << line << "\n";
    ++i;
  }
  EXPECT_EQ(i, ref["tests"].size());

  std::stringstream decoded;
  st = RunTokenize(ReferenceOptions(true), ids_lines, decoded);
  ASSERT_TRUE(st.ok()) << st.ToString();
  i = 0;
  while (std::getline(decoded, line)) {
    EXPECT_EQ(nlohmann::json::parse(line)["text"], ref["tests"][i]["text"]);
    ++i;
  }
  EXPECT_EQ(i, ref["tests"].size());
}

TEST(TokenizeCommand, WithoutMetaUsesUpstreamPatternAndSpecials) {
  TokenizeOptions options = ReferenceOptions(true);
  options.meta_path.clear();
  std::stringstream in("{\"ids\": [72, 600, 603]}\n"), out;
  ASSERT_TRUE(RunTokenize(options, in, out).ok());
  EXPECT_EQ(nlohmann::json::parse(out.str())["text"], "H<|reserved_0|><|reserved_3|>");
}

TEST(TokenizeCommand, ErrorsNameTheLine) {
  struct Case {
    bool decode;
    std::string input;
    std::string message;
  };
  const std::vector<Case> cases = {
      {false, "{\"text\": \"ok\"}\n{\"text\": 5}\n", "stdin line 2: expected {\"text\""},
      {false, "{\"text\": \"ok\"}\n\n{\"text\": \"x\xC3(\"}\n",
       "stdin line 3: invalid UTF-8 at byte offset 11"},
      {false, "not json\n", "stdin line 1: bad JSON"},
      {true, "{\"ids\": [1, 2]}\n{\"ids\": [1, 604]}\n", "stdin line 2: ids[1]: 604"},
      {true, "{\"ids\": [1, -2]}\n", "stdin line 1: ids[1]"},
      {true, "{\"text\": \"x\"}\n", "stdin line 1: expected {\"ids\""},
  };
  for (const auto& c : cases) {
    std::stringstream in(c.input), out;
    Status st = RunTokenize(ReferenceOptions(c.decode), in, out);
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << c.input;
    EXPECT_NE(st.message().find(c.message), std::string::npos) << st.message();
  }
  TokenizeOptions missing = ReferenceOptions(false);
  missing.ranks_path = "/nonexistent/ranks.tiktoken";
  std::stringstream in("{\"text\": \"x\"}\n"), out;
  Status st = RunTokenize(missing, in, out);
  EXPECT_NE(st.message().find("/nonexistent/ranks.tiktoken"), std::string::npos) << st.message();
}

TEST(TokenizeCommand, DecodedInvalidUtf8IsReplaced) {
  // 228 alone is the first byte of a three-byte character: tiktoken's decode gives U+FFFD.
  std::stringstream in("{\"ids\": [72, 228]}\n"), out;
  ASSERT_TRUE(RunTokenize(ReferenceOptions(true), in, out).ok());
  EXPECT_EQ(nlohmann::json::parse(out.str())["text"], "H\xEF\xBF\xBD");
}

TEST(TokenizeCommand, RegistersTheSubcommand) {
  CLI::App app("xvctl");
  AddTokenizeCommand(&app);
  CLI::App* cmd = app.get_subcommand("tokenize");
  ASSERT_NE(cmd, nullptr);
  EXPECT_NE(cmd->get_option("--ranks"), nullptr);
  EXPECT_NE(cmd->get_option("--meta"), nullptr);
  EXPECT_NE(cmd->get_option("--decode"), nullptr);
}

}  // namespace
}  // namespace xv::tok
