// PrometheusText: writes the Prometheus text exposition format (version 0.0.4) that /metrics
// serves: one `# HELP` and `# TYPE` line per metric family, then its samples.
// Thread-safety: none; one writer per response.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace xv::daemon::web {

class PrometheusText {
 public:
  using Labels = std::vector<std::pair<std::string, std::string>>;

  // Starts a family. `type` is gauge | counter. Names must match [a-zA-Z_:][a-zA-Z0-9_:]*
  // (callers pass constants).
  void Family(const std::string& name, const std::string& help, const std::string& type);
  // One sample of the current family. Label values are escaped (\\, \", \n); non-finite values
  // are written as NaN, +Inf, -Inf.
  void Sample(const std::string& name, const Labels& labels, double value);

  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

// A label value escaped for the text format: backslash, double quote and newline.
std::string EscapeLabelValue(const std::string& value);
// A sample value as the text format writes it: integers without a fraction, others with up to 17
// significant digits, NaN, +Inf, -Inf.
std::string FormatSampleValue(double value);

}  // namespace xv::daemon::web
