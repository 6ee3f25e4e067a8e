#include "worker/line_tail.h"

#include <gtest/gtest.h>

#include "common/untrusted_text.h"

namespace xv::worker {
namespace {

TEST(LineTail, KeepsTheLastLinesAcrossChunkBoundaries) {
  LineTail tail(3);
  tail.Append("one\ntw");
  tail.Append("o\nthree\nfo");
  tail.Append("ur\nfive\n");
  EXPECT_EQ(tail.Text(), "three\nfour\nfive");
}

TEST(LineTail, APartialLastLineIsShownAndCountsAgainstTheLimit) {
  LineTail tail(2);
  tail.Append("a\nb\nc\nunfinished");
  EXPECT_EQ(tail.Text(), "c\nunfinished");
}

TEST(LineTail, StripsCarriageReturnsAndCutsLongLines) {
  LineTail tail(5, 4);
  tail.Append("abcdefgh\r\nxy\r\n");
  EXPECT_EQ(tail.Text(), "abcd\nxy");
}

TEST(LineTail, EmptyStreamGivesEmptyText) {
  LineTail tail(5);
  EXPECT_EQ(tail.Text(), "");
}

std::string Repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

TEST(LineTail, ALongLineOfTwoByteCharactersIsCutOnACodePoint) {
  // 3,000 "é" (6,000 bytes): a cut at 4,096 bytes would fall inside a character.
  LineTail tail(5);
  tail.Append("x" + Repeat("\xC3\xA9", 3000) + "\nnext\n");
  const std::string text = tail.Text();
  EXPECT_TRUE(IsValidUtf8(text));
  EXPECT_EQ(text, "x" + Repeat("\xC3\xA9", 2047) + "\nnext");
}

TEST(LineTail, InvalidBytesBecomeReplacementCharacters) {
  LineTail tail(5);
  tail.Append("bad \xFF\xFE bytes\n");
  tail.Append("split \xC3");  // "é" arrives in two chunks
  tail.Append("\xA9 ok\n");
  EXPECT_EQ(tail.Text(), "bad \xEF\xBF\xBD\xEF\xBF\xBD bytes\nsplit \xC3\xA9 ok");
}

TEST(LineTail, AnEndlessProgressLineKeepsItsEndOnACodePoint) {
  // A tqdm bar of "█" (3 bytes each) with '\r' and no newline: memory stays bounded and the tail
  // starts on a character.
  LineTail tail(3, 100);
  for (int i = 0; i < 1000; ++i) tail.Append("\r" + Repeat("\xE2\x96\x88", 7));
  const std::string text = tail.Text();
  EXPECT_TRUE(IsValidUtf8(text));
  EXPECT_LE(text.size(), 100u);
  EXPECT_GE(text.size(), 90u);
  EXPECT_EQ(text.substr(text.size() - 3), "\xE2\x96\x88");
}

}  // namespace
}  // namespace xv::worker
