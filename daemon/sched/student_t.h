// Student's t distribution for the keep/discard decider: the regularised incomplete beta function
// (Lentz's continued fraction, no external libraries), the t CDF and upper tail, and the quantile.
// All functions are pure and thread-safe. Accuracy: about 1e-12 absolute for df <= 1e6; beyond
// that the normal limit is used.
#pragma once

namespace xv::sched {

// I_x(a, b), the regularised incomplete beta function.
// Requires a > 0, b > 0, 0 <= x <= 1; returns NaN otherwise (or for NaN input).
double RegularizedIncompleteBeta(double a, double b, double x);

// P(T <= t) for T ~ Student t with `df` degrees of freedom (df > 0, real-valued, as Welch's
// approximation produces). t may be +-infinity. Returns NaN for NaN input or df <= 0.
double StudentTCdf(double t, double df);

// P(T > t), computed without cancellation for large t (use it for one-sided p-values).
double StudentTUpperTail(double t, double df);

// The t with StudentTCdf(t, df) == p, for 0 < p < 1 and df > 0 (bisection to 1e-12 relative);
// NaN outside that domain.
double StudentTQuantile(double p, double df);

}  // namespace xv::sched
