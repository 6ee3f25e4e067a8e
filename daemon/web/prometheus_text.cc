#include "daemon/web/prometheus_text.h"

#include <cmath>
#include <cstdio>

namespace xv::daemon::web {

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatSampleValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[64];
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", value);
  } else {
    std::snprintf(buf, sizeof buf, "%.17g", value);
  }
  return buf;
}

void PrometheusText::Family(const std::string& name, const std::string& help,
                            const std::string& type) {
  std::string escaped_help;
  for (char c : help) {
    if (c == '\\') {
      escaped_help += "\\\\";
    } else if (c == '\n') {
      escaped_help += "\\n";
    } else {
      escaped_help += c;
    }
  }
  text_ += "# HELP " + name + " " + escaped_help + "\n";
  text_ += "# TYPE " + name + " " + type + "\n";
}

void PrometheusText::Sample(const std::string& name, const Labels& labels, double value) {
  text_ += name;
  if (!labels.empty()) {
    text_ += "{";
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i > 0) text_ += ",";
      text_ += labels[i].first + "=\"" + EscapeLabelValue(labels[i].second) + "\"";
    }
    text_ += "}";
  }
  text_ += " " + FormatSampleValue(value) + "\n";
}

}  // namespace xv::daemon::web
