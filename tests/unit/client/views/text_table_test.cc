#include "client/views/text_table.h"

#include <gtest/gtest.h>

#include <sstream>

namespace xv::client {
namespace {

TEST(TextTable, AlignsColumnsAndPadsShortRows) {
  using A = TextTable::Align;
  TextTable t({{"id", A::kRight}, {"name", A::kLeft}, {"tok/s", A::kRight}});
  t.AddRow({"7", "matrix_lr=0.02", "12,345"});
  t.AddRow({"12", "head"});
  EXPECT_EQ(t.Render(),
            "id  name             tok/s\n"
            "--  --------------  ------\n"
            " 7  matrix_lr=0.02  12,345\n"
            "12  head\n");
}

TEST(TextTable, WidthCountsCodePointsNotBytes) {
  EXPECT_EQ(DisplayWidth("héllo"), 5u);
  TextTable t({{"a", TextTable::Align::kLeft}, {"b", TextTable::Align::kLeft}});
  t.AddRow({"é", "x"});
  t.AddRow({"ab", "y"});
  EXPECT_EQ(t.Render(), "a   b\n--  -\né   x\nab  y\n");
}

TEST(TextTable, FittingLeavesOutTheHighestPriorityNumbersFirstThenCutsShrinkableCells) {
  using A = TextTable::Align;
  TextTable t({{"id", A::kRight, 0},
               {"name", A::kLeft, 0, true},
               {"device", A::kLeft, 2},
               {"tok/s", A::kRight, 1}});
  t.AddRow({"7", "matrix_lr=0.02,embedding_lr=0.6", "NVIDIA H200", "12,345"});
  EXPECT_EQ(t.RenderFitting(0), t.Render());
  // 2 + 2 + 31 + 2 + 11 + 2 + 6 = 56 wide. At 45 every column fits once the name counts at its
  // soft width (16): nothing is left out and the name is cut to the 20 code points left for it.
  EXPECT_EQ(t.RenderFitting(45),
            "id  name                  device        tok/s\n"
            "--  --------------------  -----------  ------\n"
            " 7  matrix_lr=0.02,embe\u2026  NVIDIA H200  12,345\n");
  // At 30 the device (priority 2) goes; the name takes the 18 code points left.
  EXPECT_EQ(t.RenderFitting(30),
            "id  name                 tok/s\n"
            "--  ------------------  ------\n"
            " 7  matrix_lr=0.02,em\u2026  12,345\n");
  // At 24 tok/s (priority 1) goes too, and the name gets 20, the last one an ellipsis.
  EXPECT_EQ(t.RenderFitting(24),
            "id  name\n"
            "--  --------------------\n"
            " 7  matrix_lr=0.02,embe\u2026\n");
  // Never narrower than 8 code points (or the header): a table that cannot fit comes out wider.
  EXPECT_EQ(t.RenderFitting(5), "id  name\n--  --------\n 7  matrix_\u2026\n");
}

TEST(TextTable, CutToWidthCountsCodePoints) {
  EXPECT_EQ(CutToWidth("h\u00e9llo", 5), "h\u00e9llo");
  EXPECT_EQ(CutToWidth("h\u00e9llo", 3), "h\u00e9\u2026");
  EXPECT_EQ(CutToWidth("abc", 0), "");
}

TEST(TextTable, WrapToWidthBreaksAtSpacesAndIndents) {
  EXPECT_EQ(WrapToWidth("round 1 drift: tok/s head 1015", 0, "  "),
            "round 1 drift: tok/s head 1015\n");
  EXPECT_EQ(WrapToWidth("round 1 drift: tok/s head 1015", 14, "  "),
            "round 1 drift:\n  tok/s head\n  1015\n");
  // A word wider than the line stands alone, uncut; code points count, not bytes.
  EXPECT_EQ(WrapToWidth("a r\u00e9\u00e9l-long-word b", 6, " "),
            "a\n r\u00e9\u00e9l-long-word\n b\n");
  for (const std::string& line : {std::string("round 1 drift: tok/s head 1015")}) {
    std::istringstream lines(WrapToWidth(line, 12, "    "));
    std::string one;
    while (std::getline(lines, one)) EXPECT_LE(DisplayWidth(one), 12u) << one;
  }
}

}  // namespace
}  // namespace xv::client
