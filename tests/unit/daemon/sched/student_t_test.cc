// Student t distribution and the regularised incomplete beta, against closed forms computed here
// (never against the implementation itself).
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "daemon/sched/student_t.h"
#include "tests/unit/daemon/sched/t_closed_forms.h"

namespace xv::sched {
namespace {

constexpr double kTol = 1e-12;

TEST(IncompleteBetaTest, ClosedForms) {
  for (double x : {0.0, 1e-6, 0.1, 0.37, 0.5, 0.8, 0.999, 1.0}) {
    EXPECT_NEAR(RegularizedIncompleteBeta(1.0, 1.0, x), x, kTol) << x;
    EXPECT_NEAR(RegularizedIncompleteBeta(3.5, 1.0, x), std::pow(x, 3.5), kTol) << x;
    EXPECT_NEAR(RegularizedIncompleteBeta(1.0, 2.5, x), 1.0 - std::pow(1.0 - x, 2.5), kTol) << x;
    // I_x(2, 2) = 3x^2 - 2x^3.
    EXPECT_NEAR(RegularizedIncompleteBeta(2.0, 2.0, x), 3 * x * x - 2 * x * x * x, kTol) << x;
    // I_x(1/2, 1/2) = (2 / pi) asin(sqrt(x)).
    EXPECT_NEAR(RegularizedIncompleteBeta(0.5, 0.5, x), 2.0 / M_PI * std::asin(std::sqrt(x)), kTol)
        << x;
  }
  for (double a : {0.5, 3.0, 40.0, 2500.0}) {
    EXPECT_NEAR(RegularizedIncompleteBeta(a, a, 0.5), 0.5, 1e-10) << a;
  }
}

TEST(IncompleteBetaTest, OutOfDomainIsNaN) {
  EXPECT_TRUE(std::isnan(RegularizedIncompleteBeta(0.0, 1.0, 0.5)));
  EXPECT_TRUE(std::isnan(RegularizedIncompleteBeta(1.0, -1.0, 0.5)));
  EXPECT_TRUE(std::isnan(RegularizedIncompleteBeta(1.0, 1.0, 1.5)));
  EXPECT_TRUE(std::isnan(RegularizedIncompleteBeta(1.0, 1.0, std::nan(""))));
}

TEST(StudentTTest, Df10AgainstTablesAndTheEvenDfSeries) {
  // P(T > 2) for 10 degrees of freedom: tables give 0.036694.
  EXPECT_NEAR(StudentTUpperTail(2.0, 10.0), 0.036694, 5e-7);
  EXPECT_NEAR(StudentTUpperTail(2.0, 10.0), testing::EvenDfUpperTail(2.0, 10), kTol);
  EXPECT_NEAR(StudentTCdf(-2.0, 10.0), testing::EvenDfUpperTail(2.0, 10), kTol);
  EXPECT_NEAR(StudentTCdf(2.0, 10.0), 1.0 - testing::EvenDfUpperTail(2.0, 10), kTol);
  for (int df : {6, 8, 30, 100}) {
    for (double t : {0.1, 1.0, 2.5, 6.0}) {
      EXPECT_NEAR(StudentTUpperTail(t, df), testing::EvenDfUpperTail(t, df), kTol)
          << df << " " << t;
    }
  }
}

TEST(StudentTTest, CauchyAtOneDegreeOfFreedom) {
  for (double t : {-50.0, -3.0, -1.0, -0.2, 0.0, 0.5, 1.0, 2.0, 7.5, 1e4}) {
    EXPECT_NEAR(StudentTUpperTail(t, 1.0), 0.5 - std::atan(t) / M_PI, kTol) << t;
    EXPECT_NEAR(StudentTCdf(t, 1.0), 0.5 + std::atan(t) / M_PI, kTol) << t;
  }
}

TEST(StudentTTest, ClosedFormsForTwoThreeAndFourDegrees) {
  for (double t : {-6.0, -2.0, -0.7, 0.0, 0.3, 1.0, 2.5, 9.0}) {
    // df = 2: F(t) = 1/2 + t / (2 sqrt(2 + t^2)).
    EXPECT_NEAR(StudentTCdf(t, 2.0), 0.5 + t / (2.0 * std::sqrt(2.0 + t * t)), kTol) << t;
    // df = 3: F(t) = 1/2 + (1/pi) (t / (sqrt3 (1 + t^2/3)) + atan(t / sqrt3)).
    const double s3 = std::sqrt(3.0);
    EXPECT_NEAR(StudentTCdf(t, 3.0),
                0.5 + (t / (s3 * (1.0 + t * t / 3.0)) + std::atan(t / s3)) / M_PI, kTol)
        << t;
    // df = 4: F(t) = 1/2 + (3/8) (t / sqrt(1 + t^2/4)) (1 - t^2 / (12 (1 + t^2/4))).
    const double u = 1.0 + t * t / 4.0;
    EXPECT_NEAR(StudentTCdf(t, 4.0), 0.5 + 0.375 * t / std::sqrt(u) * (1.0 - t * t / (12.0 * u)),
                kTol)
        << t;
  }
}

TEST(StudentTTest, LargeDfApproachesTheNormal) {
  for (double t : {-3.0, -1.0, 0.5, 1.6448536269514722, 1.96, 4.0}) {
    const double normal_tail = 0.5 * std::erfc(t / std::sqrt(2.0));
    EXPECT_NEAR(StudentTUpperTail(t, 1e5), normal_tail, 2e-5) << t;
    EXPECT_NEAR(StudentTUpperTail(t, 1e9), normal_tail, 1e-9) << t;
  }
}

TEST(StudentTTest, FarTailsKeepTheirPrecision) {
  // df = 1: P(T > t) = atan(1/t) / pi for t > 0, no cancellation.
  EXPECT_NEAR(StudentTUpperTail(1e6, 1.0) / (std::atan(1e-6) / M_PI), 1.0, 1e-9);
  // df = 2: P(T > t) = (1 - t / sqrt(2 + t^2)) / 2 = 1 / (sqrt(2 + t^2) (sqrt(2 + t^2) + t)).
  const double t = 300.0;
  const double r = std::sqrt(2.0 + t * t);
  EXPECT_NEAR(StudentTUpperTail(t, 2.0) / (1.0 / (r * (r + t))), 1.0, 1e-9);
  EXPECT_EQ(StudentTUpperTail(std::numeric_limits<double>::infinity(), 3.0), 0.0);
  EXPECT_EQ(StudentTUpperTail(-std::numeric_limits<double>::infinity(), 3.0), 1.0);
  EXPECT_TRUE(std::isnan(StudentTUpperTail(1.0, 0.0)));
  EXPECT_TRUE(std::isnan(StudentTCdf(std::nan(""), 3.0)));
}

TEST(StudentTTest, QuantileMatchesClosedForms) {
  for (double p : {0.001, 0.05, 0.3, 0.5, 0.9, 0.95, 0.999}) {
    // df = 1: t = tan(pi (p - 1/2)); df = 2: t = (2p - 1) / sqrt(2 p (1 - p)).
    const double cauchy = std::tan(M_PI * (p - 0.5));
    EXPECT_NEAR(StudentTQuantile(p, 1.0), cauchy, 1e-9 * std::max(1.0, std::fabs(cauchy))) << p;
    EXPECT_NEAR(StudentTQuantile(p, 2.0), (2 * p - 1) / std::sqrt(2 * p * (1 - p)), 1e-9) << p;
  }
  // Tables: t_{0.95, 4} = 2.131847, t_{0.975, 10} = 2.228139.
  EXPECT_NEAR(StudentTQuantile(0.95, 4.0), 2.131847, 1e-6);
  EXPECT_NEAR(StudentTQuantile(0.975, 10.0), 2.228139, 1e-6);
  EXPECT_TRUE(std::isnan(StudentTQuantile(1.0, 3.0)));
  EXPECT_TRUE(std::isnan(StudentTQuantile(0.5, -1.0)));
}

}  // namespace
}  // namespace xv::sched
