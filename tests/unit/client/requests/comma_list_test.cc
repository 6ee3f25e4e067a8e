// SplitCommaList: the one splitter behind --candidate and --sweep (client/requests/comma_list.h).
#include "client/requests/comma_list.h"

#include <gtest/gtest.h>

#include "client/requests/candidate_spec.h"
#include "client/requests/sweep_expansion.h"

namespace xv::client {
namespace {

using Items = std::vector<std::string>;

Items Split(const std::string& text) {
  Items items = {"untouched"};
  Status st = SplitCommaList(text, &items);
  EXPECT_TRUE(st.ok()) << text << ": " << st.ToString();
  return items;
}

TEST(SplitCommaList, SplitsAtTopLevelCommasAndTrimsBlanks) {
  EXPECT_EQ(Split("a=1,b=2"), (Items{"a=1", "b=2"}));
  EXPECT_EQ(Split(" 0.03 ,\t0.04,0.05 "), (Items{"0.03", "0.04", "0.05"}));
  EXPECT_EQ(Split("one"), (Items{"one"}));
}

TEST(SplitCommaList, CommasInsideBracketsDoNotSplit) {
  EXPECT_EQ(Split("[0.8, 0.95],[0.9, 0.99]"), (Items{"[0.8, 0.95]", "[0.9, 0.99]"}));
  EXPECT_EQ(Split("x={a: 1, b: [2, 3]}, y=4"), (Items{"x={a: 1, b: [2, 3]}", "y=4"}));
  EXPECT_EQ(Split("[[1, 2], [3, 4]],5"), (Items{"[[1, 2], [3, 4]]", "5"}));
}

TEST(SplitCommaList, CommasAndBracketsInsideQuotesAreText) {
  EXPECT_EQ(Split("'S,L',SSSL"), (Items{"'S,L'", "SSSL"}));
  EXPECT_EQ(Split("\"a,[b\",c"), (Items{"\"a,[b\"", "c"}));
  // A quote of the other kind inside quotes is text too.
  EXPECT_EQ(Split("\"it's, fine\",x"), (Items{"\"it's, fine\"", "x"}));
  // YAML escapes: '' inside single quotes, \" inside double quotes, do not end the quote.
  EXPECT_EQ(Split("'it''s, one',two"), (Items{"'it''s, one'", "two"}));
  EXPECT_EQ(Split("\"say \\\"a, b\\\"\",two"), (Items{"\"say \\\"a, b\\\"\"", "two"}));
  EXPECT_EQ(Split("\"back\\\\\",two"), (Items{"\"back\\\\\"", "two"}));
}

TEST(SplitCommaList, EmptyItemsAreKeptForTheCallerToJudge) {
  EXPECT_EQ(Split(""), (Items{""}));
  EXPECT_EQ(Split("a,,b"), (Items{"a", "", "b"}));
  EXPECT_EQ(Split(" , "), (Items{"", ""}));
  EXPECT_EQ(Split("a,"), (Items{"a", ""}));
}

TEST(SplitCommaList, UnbalancedBracketsOrQuotesAreAnErrorAndLeaveTheOutputAlone) {
  for (const std::string text :
       {"[0.8, 0.95", "0.8]", "[0.8, 0.95}", "{a: [1}]", "'S,L", "\"S,L", "\"a\\\"", "],["}) {
    Items items = {"untouched"};
    Status st = SplitCommaList(text, &items);
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << text;
    EXPECT_EQ(st.message(), "unbalanced brackets or quotes") << text;
    EXPECT_EQ(items, (Items{"untouched"})) << text;
  }
}

// Both flags read their lists through the splitter, so they agree on what an item is and on the
// errors.
TEST(SplitCommaList, CandidateAndSweepAgree) {
  const std::string values = "[0.8, 0.95],'S,L',{a: 1}";
  Items items;
  ASSERT_TRUE(SplitCommaList(values, &items).ok());
  std::vector<v1::Override> cand;
  ASSERT_TRUE(ParseCandidate("a=[0.8, 0.95],b='S,L',c={a: 1}", &cand).ok());
  SweepAxis axis;
  ASSERT_TRUE(ParseSweep("k=" + values, &axis).ok());
  ASSERT_EQ(cand.size(), items.size());
  EXPECT_EQ(axis.values, items);
  for (size_t i = 0; i < items.size(); ++i) EXPECT_EQ(cand[i].value(), items[i]);

  Status c = ParseCandidate("adam_betas=[0.8, 0.95}", &cand);
  Status s = ParseSweep("adam_betas=[0.8, 0.95}", &axis);
  EXPECT_EQ(c.message(), "--candidate 'adam_betas=[0.8, 0.95}': unbalanced brackets or quotes");
  EXPECT_EQ(s.message(), "--sweep 'adam_betas=[0.8, 0.95}': unbalanced brackets or quotes");
  // A closing bracket without an opener is refused by both (--candidate used to let "],[" pass).
  EXPECT_FALSE(ParseCandidate("a=],[", &cand).ok());
  EXPECT_FALSE(ParseSweep("a=],[", &axis).ok());
  // Empty items: --candidate skips them, --sweep names the empty value.
  ASSERT_TRUE(ParseCandidate("depth=4,", &cand).ok());
  EXPECT_EQ(cand.size(), 1u);
  EXPECT_EQ(ParseSweep("depth=4,", &axis).message(),
            "--sweep 'depth=4,': value 2 of depth is empty");
}

}  // namespace
}  // namespace xv::client
