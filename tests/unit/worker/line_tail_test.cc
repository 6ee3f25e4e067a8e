#include "worker/line_tail.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace xv::worker
