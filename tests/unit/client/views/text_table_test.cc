#include "client/views/text_table.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace xv::client
