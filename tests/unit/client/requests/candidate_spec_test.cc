#include "client/requests/candidate_spec.h"

#include <gtest/gtest.h>

namespace xv::client {
namespace {

TEST(ParseOverride, SplitsAtTheFirstEquals) {
  v1::Override o;
  ASSERT_TRUE(ParseOverride("window_pattern = SSSL", "--set", &o).ok());
  EXPECT_EQ(o.key(), "window_pattern");
  EXPECT_EQ(o.value(), "SSSL");
  ASSERT_TRUE(ParseOverride("x=a=b", "--set", &o).ok());
  EXPECT_EQ(o.value(), "a=b");
}

TEST(ParseOverride, ErrorsNameTheOptionAndTheText) {
  v1::Override o;
  Status st = ParseOverride("matrix_lr", "--set", &o);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(st.message(), "--set 'matrix_lr': expected key=value");
  EXPECT_FALSE(ParseOverride("=1", "--set", &o).ok());
  EXPECT_FALSE(ParseOverride("depth=", "--set", &o).ok());
}

TEST(ParseCandidate, CommasInsideBracketsAndQuotesDoNotSplit) {
  std::vector<v1::Override> out;
  ASSERT_TRUE(
      ParseCandidate("matrix_lr=0.03, adam_betas=[0.8, 0.95],window_pattern='S,L'", &out).ok());
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].key(), "matrix_lr");
  EXPECT_EQ(out[0].value(), "0.03");
  EXPECT_EQ(out[1].key(), "adam_betas");
  EXPECT_EQ(out[1].value(), "[0.8, 0.95]");
  EXPECT_EQ(out[2].value(), "'S,L'");
}

TEST(ParseCandidate, RejectsEmptyAndUnbalanced) {
  std::vector<v1::Override> out;
  EXPECT_FALSE(ParseCandidate("", &out).ok());
  EXPECT_FALSE(ParseCandidate(" , ", &out).ok());
  Status st = ParseCandidate("adam_betas=[0.8, 0.95", &out);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("unbalanced"), std::string::npos);
  EXPECT_FALSE(ParseCandidate("depth=4,oops", &out).ok());
}

}  // namespace
}  // namespace xv::client
