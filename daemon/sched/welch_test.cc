#include "daemon/sched/welch_test.h"

#include <cmath>

#include "daemon/sched/student_t.h"

namespace xv::sched {

SampleSummary Summarize(const std::vector<double>& values) {
  SampleSummary s;
  s.n = static_cast<int>(values.size());
  if (s.n == 0) return s;
  double sum = 0.0;
  for (double v : values) sum += v;
  s.mean = sum / s.n;
  if (s.n < 2) return s;
  double squares = 0.0;
  for (double v : values) squares += (v - s.mean) * (v - s.mean);
  s.sd = std::sqrt(squares / (s.n - 1));
  return s;
}

std::optional<WelchResult> WelchOneSidedLower(const SampleSummary& candidate,
                                              const SampleSummary& head) {
  if (candidate.n < 2 || head.n < 2) return std::nullopt;
  WelchResult r;
  r.improvement = head.mean - candidate.mean;
  const double var_c = candidate.sd * candidate.sd / candidate.n;
  const double var_h = head.sd * head.sd / head.n;
  const double se2 = var_c + var_h;
  r.standard_error = std::sqrt(se2);
  if (se2 <= 0.0) {
    r.df = candidate.n + head.n - 2;
    r.p_one_sided = r.improvement > 0.0 ? 0.0 : 1.0;
    return r;
  }
  r.df = se2 * se2 / (var_c * var_c / (candidate.n - 1) + var_h * var_h / (head.n - 1));
  r.t = r.improvement / r.standard_error;
  r.p_one_sided = StudentTUpperTail(*r.t, r.df);
  return r;
}

}  // namespace xv::sched
