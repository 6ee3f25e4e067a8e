#include "worker/upstream_output_parser.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

namespace xv::worker {
namespace {

using nlohmann::json;

constexpr size_t kMaxMalformedExamples = 5;
constexpr double kExplodingLoss = 100.0;  // upstream's fast-fail threshold

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// "1,234,567" / "312ms" / "38.2%" / "263s" / "nan" -> the number; nullopt when the text is not a
// number followed by an optional unit (ms, s, %).
std::optional<double> ParseNumber(std::string_view text) {
  text = Trim(text);
  for (std::string_view unit : {"ms", "s", "%"}) {
    if (text.size() > unit.size() && text.substr(text.size() - unit.size()) == unit) {
      text.remove_suffix(unit.size());
      break;
    }
  }
  std::string digits;
  for (char c : text) {
    if (c != ',') digits.push_back(c);
  }
  if (digits.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(digits.c_str(), &end);
  if (end != digits.c_str() + digits.size()) return std::nullopt;
  return v;
}

// The integer value of a number printed where upstream prints an integer (num_steps, depth,
// epoch); nullopt for nan, inf and values outside int64 (converting those is undefined).
std::optional<int64_t> IntegerOf(double v) {
  if (!std::isfinite(v) || v < -9.2e18 || v > 9.2e18) return std::nullopt;
  return static_cast<int64_t>(v);
}

bool IsKeyName(std::string_view key) {
  if (key.empty()) return false;
  for (char c : key) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '/') return false;
  }
  return true;
}

std::string NumberText(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return json(v).dump();
}

json LogEvent(std::string_view text, double now_s) {
  return {{"type", "log"}, {"t", now_s}, {"text", std::string(text)}};
}

}  // namespace

std::vector<json> UpstreamOutputParser::ParseLine(std::string_view line, double now_s) {
  std::vector<json> out;
  size_t start = 0;
  while (start <= line.size()) {
    size_t cr = line.find('\r', start);
    if (cr == std::string_view::npos) cr = line.size();
    ParseSegment(line.substr(start, cr - start), now_s, &out);
    start = cr + 1;
  }
  return out;
}

void UpstreamOutputParser::ParseSegment(std::string_view raw, double now_s,
                                        std::vector<json>* out) {
  const std::string_view segment = Trim(raw);
  if (segment.empty()) return;
  if (segment == "---") {
    FlushStep(out);
    if (in_summary_) EndSummaryBlock(now_s, out);
    in_summary_ = true;
    return;
  }
  if (in_summary_) {
    const size_t colon = segment.find(':');
    const std::string_view key =
        colon == std::string_view::npos ? std::string_view() : Trim(segment.substr(0, colon));
    if (IsKeyName(key) && key.find('/') == std::string_view::npos) {
      const std::optional<double> value = ParseNumber(segment.substr(colon + 1));
      if (!value) {
        CountMalformed(segment);
        out->push_back(LogEvent(segment, now_s));
        return;
      }
      const std::string name(key);
      if (name == "num_steps" || name == "depth") {
        const std::optional<int64_t> integer = IntegerOf(*value);
        if (integer) {
          summary_[name] = *integer;
        } else {
          summary_[name] = nullptr;
        }
      } else if (std::isfinite(*value)) {
        summary_[name] = *value;
      } else {
        summary_[name] = nullptr;
        if (name == "val_bpb") MarkDiverged("val_bpb is " + NumberText(*value));
      }
      return;
    }
    // Not `key: value`: the block is over.
    EndSummaryBlock(now_s, out);
  }
  if (segment == "FAIL") {
    FlushStep(out);
    MarkDiverged(divergence_detail_.empty()
                     ? "the trainer printed FAIL (non-finite or exploding loss) after step " +
                           std::to_string(last_step_)
                     : divergence_detail_);
    out->push_back(
        {{"type", "error"}, {"t", now_s}, {"kind", "diverged"}, {"message", divergence_detail_}});
    error_emitted_ = true;
    return;
  }
  if (segment.substr(0, 5) == "step " && ParseProgress(segment, now_s, out)) return;
  if (segment.substr(0, 5) == "step " && segment.find('|') != std::string_view::npos) {
    CountMalformed(segment);
  }
  out->push_back(LogEvent(segment, now_s));
}

bool UpstreamOutputParser::ParseProgress(std::string_view segment, double now_s,
                                         std::vector<json>* out) {
  // "step 00042 (12.3%) | loss: 3.456789 | lrm: 1.00 | ..."
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t bar = segment.find('|', start);
    parts.push_back(Trim(segment.substr(start, bar == std::string_view::npos ? bar : bar - start)));
    if (bar == std::string_view::npos) break;
    start = bar + 1;
  }
  // "step" and the first '|' may be all there is: "step | loss: 3.0" (parts[0] is then "step").
  if (parts[0].size() < 5) return false;
  std::string_view head = Trim(parts[0].substr(5));
  size_t digits = 0;
  while (digits < head.size() && std::isdigit(static_cast<unsigned char>(head[digits]))) ++digits;
  if (digits == 0 || digits > 18) return false;
  const int64_t step = std::strtoll(std::string(head.substr(0, digits)).c_str(), nullptr, 10);
  json ev = {{"type", "step"}, {"t", now_s}, {"step", step}};
  std::string_view rest = Trim(head.substr(digits));
  if (!rest.empty()) {
    // "(12.3%)"
    if (rest.front() != '(' || rest.back() != ')') return false;
    std::optional<double> pct = ParseNumber(rest.substr(1, rest.size() - 2));
    if (!pct) return false;
    ev["progress"] = *pct / 100.0;
  }
  std::optional<double> loss;
  for (size_t i = 1; i < parts.size(); ++i) {
    const size_t colon = parts[i].find(':');
    if (colon == std::string_view::npos) continue;  // a fork's free text: ignored
    const std::string_view key = Trim(parts[i].substr(0, colon));
    const std::optional<double> value = ParseNumber(parts[i].substr(colon + 1));
    if (key == "loss") {
      if (!value) return false;
      loss = value;
      continue;
    }
    if (!value || !std::isfinite(*value)) continue;
    if (key == "lrm") {
      ev["lrm"] = *value;
    } else if (key == "dt") {
      // upstream prints milliseconds ("312ms"); a bare number or "0.3s" is read by its unit.
      const std::string_view v = Trim(parts[i].substr(colon + 1));
      const bool seconds = v.size() > 1 && v.back() == 's' && v[v.size() - 2] != 'm';
      ev["dt_ms"] = seconds ? *value * 1000.0 : *value;
    } else if (key == "tok/sec") {
      ev["tok_per_sec"] = *value;
    } else if (key == "mfu") {
      ev["mfu_percent"] = *value;
    } else if (key == "epoch") {
      if (const std::optional<int64_t> epoch = IntegerOf(*value)) ev["epoch"] = *epoch;
    } else if (key == "remaining") {
      ev["remaining_s"] = *value;
    }
  }
  if (!loss) return false;
  last_step_ = step;
  if (!std::isfinite(*loss) || *loss > kExplodingLoss) {
    FlushStep(out);
    const std::string value = NumberText(*loss);
    out->push_back({{"type", "nan"},
                    {"t", now_s},
                    {"step", step},
                    {"micro_step", nullptr},
                    {"what", "loss"},
                    {"value", value}});
    if (!diverged_) {
      MarkDiverged((std::isfinite(*loss) ? "exploding loss (" : "non-finite loss (") + value +
                   ") at step " + std::to_string(step));
    }
    return true;
  }
  ev["loss"] = *loss;
  if (step > 10 && ev.contains("tok_per_sec")) {
    timed_tok_per_sec_sum_ += ev["tok_per_sec"].get<double>();
    ++timed_tok_per_sec_n_;
  }
  held_step_ = std::move(ev);
  if (now_s - last_step_sent_t_ >= min_step_interval_s_) FlushStep(out);
  return true;
}

void UpstreamOutputParser::FlushStep(std::vector<json>* out) {
  if (!held_step_) return;
  last_step_sent_t_ = (*held_step_)["t"].get<double>();
  out->push_back(std::move(*held_step_));
  held_step_.reset();
}

void UpstreamOutputParser::EndSummaryBlock(double now_s, std::vector<json>* out) {
  in_summary_ = false;
  if (summary_.empty()) return;
  json ev = {{"type", "summary"}, {"t", now_s}};
  for (auto it = summary_.begin(); it != summary_.end(); ++it) ev[it.key()] = it.value();
  if (!ev.contains("tok_per_sec")) {
    if (timed_tok_per_sec_n_ > 0) {
      ev["tok_per_sec"] = timed_tok_per_sec_sum_ / timed_tok_per_sec_n_;
    } else if (ev.contains("total_tokens_M") && ev["total_tokens_M"].is_number() &&
               ev.contains("training_seconds") && ev["training_seconds"].is_number() &&
               ev["training_seconds"].get<double>() > 0) {
      ev["tok_per_sec"] =
          ev["total_tokens_M"].get<double>() * 1e6 / ev["training_seconds"].get<double>();
    }
  }
  ev["metric_version"] = metric_version_;
  ev["output_format"] = "upstream";
  if (ev.contains("val_bpb") && ev["val_bpb"].is_number()) summary_emitted_ = true;
  summary_ = json::object();
  out->push_back(std::move(ev));
}

std::vector<json> UpstreamOutputParser::Finish(double now_s) {
  std::vector<json> out;
  FlushStep(&out);
  if (in_summary_) EndSummaryBlock(now_s, &out);
  if (diverged_ && !error_emitted_) {
    out.push_back(
        {{"type", "error"}, {"t", now_s}, {"kind", "diverged"}, {"message", divergence_detail_}});
    error_emitted_ = true;
  }
  return out;
}

void UpstreamOutputParser::MarkDiverged(const std::string& detail) {
  if (diverged_) return;
  diverged_ = true;
  divergence_detail_ = detail;
}

void UpstreamOutputParser::CountMalformed(std::string_view segment) {
  ++malformed_lines_;
  if (malformed_examples_.size() < kMaxMalformedExamples) {
    malformed_examples_.emplace_back(segment.substr(0, 200));
  }
}

}  // namespace xv::worker
