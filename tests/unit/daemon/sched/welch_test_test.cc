// Sample summaries and the one-sided Welch test, against values worked out by hand in the comments
// and closed-form t tails.
#include <cmath>

#include <gtest/gtest.h>

#include "daemon/sched/welch_test.h"

namespace xv::sched {
namespace {

TEST(SummarizeTest, MeanAndSampleSd) {
  const SampleSummary s = Summarize({0.998, 1.000, 1.002, 1.004});
  EXPECT_EQ(s.n, 4);
  EXPECT_NEAR(s.mean, 1.001, 1e-15);
  // Deviations -3, -1, 1, 3 (x 0.001): squares sum 20e-6, over n - 1 = 3.
  EXPECT_NEAR(s.sd, std::sqrt(20e-6 / 3.0), 1e-15);
  EXPECT_EQ(Summarize({}).n, 0);
  const SampleSummary one = Summarize({0.97});
  EXPECT_EQ(one.n, 1);
  EXPECT_EQ(one.mean, 0.97);
  EXPECT_EQ(one.sd, 0.0);
}

TEST(WelchTest, EqualVariancesGiveIntegerDf) {
  // candidate {1, 2, 3}: mean 2, var 1; head {3, 4, 5}: mean 4, var 1.
  // se^2 = 1/3 + 1/3 = 2/3; t = 2 / sqrt(2/3); df = (2/3)^2 / (2 (1/3)^2 / 2) = 4.
  const auto r = WelchOneSidedLower(Summarize({1, 2, 3}), Summarize({3, 4, 5}));
  ASSERT_TRUE(r.has_value());
  const double t = 2.0 / std::sqrt(2.0 / 3.0);
  EXPECT_NEAR(r->improvement, 2.0, 1e-15);
  EXPECT_NEAR(r->standard_error, std::sqrt(2.0 / 3.0), 1e-15);
  ASSERT_TRUE(r->t.has_value());
  EXPECT_NEAR(*r->t, t, 1e-12);
  EXPECT_NEAR(r->df, 4.0, 1e-12);
  // df = 4 closed form of the upper tail.
  const double u = 1.0 + t * t / 4.0;
  const double p = 0.5 - 0.375 * t / std::sqrt(u) * (1.0 - t * t / (12.0 * u));
  EXPECT_NEAR(r->p_one_sided, p, 1e-12);
}

TEST(WelchTest, UnequalVariancesUseWelchSatterthwaite) {
  // candidate {1, 2, 3}: var 1, n 3; head {4, 6, 8}: var 4, n 3.
  // se^2 = 1/3 + 4/3 = 5/3; t = 4 / sqrt(5/3);
  // df = (5/3)^2 / ((1/3)^2 / 2 + (4/3)^2 / 2) = (25/9) / (17/18) = 50/17.
  const auto r = WelchOneSidedLower(Summarize({1, 2, 3}), Summarize({4, 6, 8}));
  ASSERT_TRUE(r.has_value());
  EXPECT_NEAR(*r->t, 4.0 / std::sqrt(5.0 / 3.0), 1e-12);
  EXPECT_NEAR(r->df, 50.0 / 17.0, 1e-12);
  EXPECT_GT(r->p_one_sided, 0.0);
  EXPECT_LT(r->p_one_sided, 0.05);
}

TEST(WelchTest, CandidateWorseGivesLargeP) {
  const auto r = WelchOneSidedLower(Summarize({3, 4, 5}), Summarize({1, 2, 3}));
  ASSERT_TRUE(r.has_value());
  EXPECT_LT(*r->t, 0.0);
  EXPECT_GT(r->p_one_sided, 0.95);
}

TEST(WelchTest, ZeroVarianceAndTooFewRuns) {
  const auto better = WelchOneSidedLower(Summarize({1, 1}), Summarize({2, 2, 2}));
  ASSERT_TRUE(better.has_value());
  EXPECT_FALSE(better->t.has_value());
  EXPECT_EQ(better->p_one_sided, 0.0);
  EXPECT_EQ(better->df, 3.0);
  const auto same = WelchOneSidedLower(Summarize({2, 2}), Summarize({2, 2}));
  ASSERT_TRUE(same.has_value());
  EXPECT_EQ(same->p_one_sided, 1.0);
  // One side constant: df = n_other - 1.
  const auto one_sided = WelchOneSidedLower(Summarize({1, 1, 1}), Summarize({2, 3, 4, 5}));
  EXPECT_NEAR(one_sided->df, 3.0, 1e-12);
  EXPECT_FALSE(WelchOneSidedLower(Summarize({1}), Summarize({2, 3})).has_value());
  EXPECT_FALSE(WelchOneSidedLower(Summarize({1, 2}), Summarize({2})).has_value());
}

}  // namespace
}  // namespace xv::sched
