#include "daemon/sched/student_t.h"

#include <cmath>
#include <limits>

namespace xv::sched {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// Above this many degrees of freedom the t distribution is taken to be the standard normal
// (the difference is below 1e-7 there, smaller than anything a bpb decision can resolve).
constexpr double kNormalLimitDf = 1e7;

// The continued fraction of I_x(a, b) (converges fast for x < (a + 1) / (a + b + 2)), evaluated
// with the modified Lentz method. Returns the fraction only; the caller multiplies by the prefix.
double IncompleteBetaContinuedFraction(double a, double b, double x) {
  constexpr int kMaxIterations = 10000;
  constexpr double kEpsilon = 1e-15;
  constexpr double kTiny = 1e-300;
  const double qab = a + b;
  const double qap = a + 1.0;
  const double qam = a - 1.0;
  double c = 1.0;
  double d = 1.0 - qab * x / qap;
  if (std::fabs(d) < kTiny) d = kTiny;
  d = 1.0 / d;
  double h = d;
  for (int m = 1; m <= kMaxIterations; ++m) {
    const double m2 = 2.0 * m;
    // Even step: d_{2m} = m (b - m) x / ((a + 2m - 1)(a + 2m)).
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
    d = 1.0 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1.0 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1.0 / d;
    h *= d * c;
    // Odd step: d_{2m+1} = -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1)).
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
    d = 1.0 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1.0 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1.0 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1.0) < kEpsilon) break;
  }
  return h;
}

double NormalUpperTail(double z) { return 0.5 * std::erfc(z / std::sqrt(2.0)); }

}  // namespace

double RegularizedIncompleteBeta(double a, double b, double x) {
  if (std::isnan(a) || std::isnan(b) || std::isnan(x)) return kNaN;
  if (a <= 0.0 || b <= 0.0 || x < 0.0 || x > 1.0) return kNaN;
  if (x == 0.0) return 0.0;
  if (x == 1.0) return 1.0;
  // log of x^a (1-x)^b / (a B(a, b)) without overflow.
  const double log_prefix =
      std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x);
  if (x < (a + 1.0) / (a + b + 2.0)) {
    return std::exp(log_prefix) * IncompleteBetaContinuedFraction(a, b, x) / a;
  }
  // Symmetry I_x(a, b) = 1 - I_{1-x}(b, a), where the fraction converges fast.
  return 1.0 - std::exp(log_prefix) * IncompleteBetaContinuedFraction(b, a, 1.0 - x) / b;
}

double StudentTUpperTail(double t, double df) {
  if (std::isnan(t) || std::isnan(df) || df <= 0.0) return kNaN;
  if (t == std::numeric_limits<double>::infinity()) return 0.0;
  if (t == -std::numeric_limits<double>::infinity()) return 1.0;
  if (df > kNormalLimitDf) return NormalUpperTail(t);
  // P(|T| > |t|) = I_{df / (df + t^2)}(df / 2, 1 / 2).
  const double x = df / (df + t * t);
  const double two_sided = RegularizedIncompleteBeta(0.5 * df, 0.5, x);
  return t >= 0.0 ? 0.5 * two_sided : 1.0 - 0.5 * two_sided;
}

double StudentTCdf(double t, double df) {
  if (std::isnan(t) || std::isnan(df) || df <= 0.0) return kNaN;
  // By symmetry P(T <= t) = P(T > -t); computing the tail avoids cancellation for t << 0.
  return StudentTUpperTail(-t, df);
}

double StudentTQuantile(double p, double df) {
  if (std::isnan(p) || std::isnan(df) || df <= 0.0 || p <= 0.0 || p >= 1.0) return kNaN;
  if (p == 0.5) return 0.0;
  // Work in the upper half and mirror: find t >= 0 with P(T > t) = tail.
  const double tail = p > 0.5 ? 1.0 - p : p;
  double lo = 0.0;
  double hi = 1.0;
  while (StudentTUpperTail(hi, df) > tail) {
    lo = hi;
    hi *= 2.0;
    if (hi > 1e300) break;
  }
  for (int i = 0; i < 2000 && hi - lo > 1e-12 * hi; ++i) {
    const double mid = 0.5 * (lo + hi);
    if (StudentTUpperTail(mid, df) > tail) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  const double t = 0.5 * (lo + hi);
  return p > 0.5 ? t : -t;
}

}  // namespace xv::sched
