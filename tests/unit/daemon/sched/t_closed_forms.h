// Closed forms of the Student t upper tail for tests, written independently of the library:
// for even df, P(|T| < t) = sin(theta) * sum_{k=0}^{df/2-1} prod_{j=1}^{k} ((2j-1)/(2j))
// cos^2(theta) with theta = atan(t / sqrt(df)) (Abramowitz & Stegun 26.7.3).
#pragma once

#include <cmath>

namespace xv::sched::testing {

// P(T > t) for even df >= 2.
inline double EvenDfUpperTail(double t, int df) {
  const double theta = std::atan(t / std::sqrt(static_cast<double>(df)));
  const double c2 = std::cos(theta) * std::cos(theta);
  double sum = 1.0;
  double term = 1.0;
  for (int k = 1; k < df / 2; ++k) {
    term *= (2.0 * k - 1.0) / (2.0 * k) * c2;
    sum += term;
  }
  return 0.5 * (1.0 - std::sin(theta) * sum);
}

}  // namespace xv::sched::testing
