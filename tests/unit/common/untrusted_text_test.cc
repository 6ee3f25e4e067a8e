// Unit tests of common/untrusted_text.h and common/bounded_json.h: UTF-8 validation and repair,
// code-point-safe cuts, terminal escaping, quoting, field checks, and the JSON nesting limit.
#include <gtest/gtest.h>

#include <string>

#include "common/bounded_json.h"
#include "common/untrusted_text.h"

namespace xv {
namespace {

const std::string kE = "\xC3\xA9";  // é, two bytes

TEST(Utf8, ValidatesWellFormedAndRefusesIllFormed) {
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8(kE + "\xE2\x82\xAC" + "\xF0\x9F\x98\x80"));  // é € 😀
  EXPECT_FALSE(IsValidUtf8("\xFF\xFE"));
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // surrogate U+D800
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xC3"));              // truncated
}

// The ASCII runs are checked eight bytes at a time: a bad or multibyte sequence is seen at every
// offset of a long text, in a word and in the tail shorter than a word.
TEST(Utf8, LongAsciiTextIsJudgedAtEveryOffset) {
  const std::string ascii(37, 'a');
  EXPECT_TRUE(IsValidUtf8(ascii));
  for (size_t at = 0; at <= ascii.size(); ++at) {
    const std::string head = ascii.substr(0, at), tail = ascii.substr(at);
    EXPECT_FALSE(IsValidUtf8(head + "\xFF" + tail)) << at;
    EXPECT_FALSE(IsValidUtf8(head + "\xC3" + tail)) << at;          // a lead byte, then ASCII
    EXPECT_FALSE(IsValidUtf8(head + "\xED\xA0\x80" + tail)) << at;  // surrogate
    EXPECT_TRUE(IsValidUtf8(head + "\xE2\x82\xAC" + tail)) << at;   // euro sign
  }
  EXPECT_FALSE(IsValidUtf8(ascii + "\xC3"));  // truncated at the very end
}

TEST(Utf8, SanitizeReplacesEachMaximalSubpart) {
  EXPECT_EQ(SanitizeUtf8("a\xFF"
                         "b"),
            "a\xEF\xBF\xBD"
            "b");
  // A truncated 3-byte sequence is one maximal subpart: one replacement character.
  EXPECT_EQ(SanitizeUtf8("\xE2\x82"
                         "x"),
            "\xEF\xBF\xBD"
            "x");
  EXPECT_EQ(SanitizeUtf8(kE), kE);
  EXPECT_TRUE(IsValidUtf8(SanitizeUtf8("\xFF\xFE\xC3\xED\xA0\x80")));
}

TEST(Utf8, CutsNeverSplitACodePoint) {
  std::string s;
  for (int i = 0; i < 10; ++i) s += kE;  // 20 bytes
  EXPECT_EQ(Utf8Prefix(s, 5).size(), 4u);
  EXPECT_EQ(Utf8Prefix(s, 6).size(), 6u);
  EXPECT_EQ(Utf8Suffix(s, 5).size(), 4u);
  EXPECT_TRUE(IsValidUtf8(Utf8Prefix(s, 7)));
  EXPECT_TRUE(IsValidUtf8(Utf8Suffix(s, 7)));
  EXPECT_EQ(Utf8Prefix("abc", 10), "abc");
  const std::string t = SanitizeAndTruncateUtf8("\xFF\xFF\xFF\xFF", 7);
  EXPECT_EQ(t.size(), 6u);  // two U+FFFD
  EXPECT_TRUE(IsValidUtf8(t));
}

TEST(Utf8, ControlCharactersAreFoundAndEscaped) {
  EXPECT_FALSE(HasControlCharacters("name-1 " + kE));
  EXPECT_TRUE(HasControlCharacters("a\x1b[2Jb"));
  EXPECT_TRUE(HasControlCharacters("bell\x07"));
  EXPECT_TRUE(HasControlCharacters("csi\xC2\x9B"));
  EXPECT_TRUE(HasControlCharacters("del\x7F"));
  EXPECT_EQ(EscapeForTerminal("a\x1b[2Jb\r\n"), "a\\x1b[2Jb\\r\\n");
  EXPECT_EQ(EscapeForTerminal("x\xC2\x9By"), "x\\u009by");
  EXPECT_EQ(EscapeForTerminal("l1\nl2\tx", /*keep_newlines_and_tabs=*/true), "l1\nl2\tx");
  EXPECT_EQ(EscapeForTerminal("\xFF"), "\xEF\xBF\xBD");
}

TEST(Utf8, QuoteExcerptIsShortAndSaysTheSize) {
  const std::string big(1 << 20, 'x');
  const std::string q = QuoteExcerpt(big);
  EXPECT_LT(q.size(), 260u);
  EXPECT_NE(q.find("(1048576 bytes)"), std::string::npos);
  EXPECT_EQ(QuoteExcerpt("ok"), "\"ok\"");
}

TEST(Utf8, CheckTextFieldNamesTheField) {
  EXPECT_TRUE(CheckTextField("name", "lr-0.02", kMaxNameBytes, true).ok());
  const Status long_name = CheckTextField("candidates[3].name", std::string(1000, 'a'), 200, true);
  EXPECT_EQ(long_name.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(long_name.message().find("candidates[3].name: 1000 bytes, over the limit of 200"),
            std::string::npos);
  const Status ctl = CheckTextField("name", "a\x1b]0;pwned\x07", 200, true);
  EXPECT_NE(ctl.message().find("name: holds a control character"), std::string::npos);
  EXPECT_EQ(ctl.message().find('\x1b'), std::string::npos);  // the error itself is printable
  const Status bad = CheckTextField("detail", "\xFF", 200, false);
  EXPECT_NE(bad.message().find("detail: not valid UTF-8"), std::string::npos);
  EXPECT_TRUE(CheckTextField("detail", "line1\nline2", 200, false).ok());
}

TEST(BoundedJson, RefusesDeepNestingWithoutRecursing) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  nlohmann::json j;
  const Status s = ParseBoundedJson(deep, "budget_json", &j);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "budget_json: nested deeper than 64 levels of arrays and objects");
  // Brackets inside strings do not count.
  EXPECT_TRUE(ParseBoundedJson("{\"a\": \"[[[[[[[[[[[[[[[[\"}", "x", &j, 3).ok());
  EXPECT_EQ(JsonNestingDepth("[{\"a\": [1]}]"), 3);
  EXPECT_EQ(JsonNestingDepth("\"[\\\"[\""), 0);
  const std::string ok64 = std::string(64, '[') + std::string(64, ']');
  EXPECT_TRUE(ParseBoundedJson(ok64, "x", &j).ok());
}

TEST(BoundedJson, NamesTheFieldOnSyntaxErrorsAndNeverQuotesInput) {
  nlohmann::json j;
  const Status s = ParseBoundedJson("{\"secret\": tru", "policy_json", &j);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("policy_json: not JSON (syntax error at byte", 0), 0u);
  EXPECT_EQ(s.message().find("secret"), std::string::npos);
}

TEST(BoundedJson, DescribesValuesWithoutContents) {
  EXPECT_EQ(DescribeJsonValue(nlohmann::json::parse("[1,2,3]")), "an array of 3");
  EXPECT_EQ(DescribeJsonValue(nlohmann::json("abc")), "a string of 3 bytes");
  EXPECT_EQ(DescribeJsonValue(nlohmann::json(-3.5)), "a number (-3.5)");
  EXPECT_EQ(DescribeJsonValue(nlohmann::json::parse("{\"a\":1}")), "an object of 1 keys");
  EXPECT_EQ(DescribeJsonValue(nlohmann::json(nullptr)), "null");
}

TEST(BoundedJson, LosslessDumpNeverThrowsOnInvalidUtf8) {
  nlohmann::json j = {{"detail", std::string("\xFF\xFE tail")}};
  EXPECT_THROW((void)j.dump(), nlohmann::json::type_error);
  const std::string d = DumpJsonLossless(j);
  EXPECT_TRUE(IsValidUtf8(d));
  EXPECT_NE(d.find("tail"), std::string::npos);
}

TEST(BoundedJson, LosslessDumpEscapesDelAndC1Controls) {
  const nlohmann::json j = {{"name", std::string("a\x7f"
                                                 "b\xC2\x9B"
                                                 "c\xC2\xA0"
                                                 "d\x1b")}};
  const std::string d = DumpJsonLossless(j);
  EXPECT_EQ(d,
            "{\"name\":\"a\\u007fb\\u009bc\xC2\xA0"
            "d\\u001b\"}");
  EXPECT_FALSE(HasControlCharacters(d));
  EXPECT_EQ(nlohmann::json::parse(d), j);  // the same value
}

}  // namespace
}  // namespace xv
