#include "common/progress_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <utility>

#include "common/html_escape.h"
#include "common/run_states.h"

namespace xv {
namespace {

constexpr double kLeft = 72, kRight = 24, kTop = 44, kBottom = 64;  // margins
constexpr double kCrashStrip = 18;  // below the plot area, above the x axis labels
constexpr double kJitter = 0.12;    // x offset per replicate, in index units

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string Fixed(double v, int decimals) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::vector<double> Ticks(double lo, double hi, int max_ticks) {
  std::vector<double> ticks;
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / max_ticks;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) ticks.push_back(t);
  return ticks;
}

const char* KindClass(ProgressPointKind kind) {
  switch (kind) {
    case ProgressPointKind::kKept:
      return "kept";
    case ProgressPointKind::kDiscarded:
      return "discarded";
    case ProgressPointKind::kPending:
      return "pending";
    case ProgressPointKind::kControl:
      return "control";
    case ProgressPointKind::kCrash:
      return "crash";
  }
  return "pending";
}

// The plot area and the data range it shows.
struct Frame {
  double w = 0, h = 0, pw = 0, ph = 0;
  double xmin = 0, xmax = 1, ymin = 0, ymax = 1;
  double X(double x) const { return kLeft + (x - xmin) / (xmax - xmin) * pw; }
  double Y(double y) const { return kTop + (1 - (y - ymin) / (ymax - ymin)) * ph; }
};

bool Measured(const ProgressPoint& p) {
  return p.kind != ProgressPointKind::kCrash && std::isfinite(p.val_bpb);
}

Frame FrameOf(const ProgressPlot& plot, double cap) {
  Frame f;
  f.w = plot.width;
  f.h = plot.height;
  f.pw = f.w - kLeft - kRight;
  f.ph = f.h - kTop - kBottom;
  int max_index = 1;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const auto& p : plot.points) {
    max_index = std::max(max_index, p.index);
    if (!Measured(p) || p.val_bpb > cap) continue;
    lo = std::min(lo, p.val_bpb);
    hi = std::max(hi, p.val_bpb);
  }
  f.xmin = 0.5;
  f.xmax = max_index + 0.5;
  if (!std::isfinite(lo)) lo = 0, hi = 1;
  const double pad = hi > lo ? (hi - lo) * 0.08 : std::max(std::fabs(lo) * 0.01, 1e-3);
  f.ymin = lo - pad;
  f.ymax = hi + pad;
  return f;
}

double PointX(const Frame& f, const ProgressPoint& p) {
  // 0, +1, -1, +2, -2 ... replicate offsets around the index.
  const int k = p.replicate;
  const double side = k == 0 ? 0 : (k % 2 == 1 ? 1 : -1) * ((k + 1) / 2);
  return f.X(p.index + side * kJitter);
}

std::string Axes(const Frame& f) {
  std::string s = "<g class=\"axes\" stroke=\"#888\" fill=\"#444\" font-size=\"11\">";
  s += "<rect x=\"" + Num(kLeft) + "\" y=\"" + Num(kTop) + "\" width=\"" + Num(f.pw) +
       "\" height=\"" + Num(f.ph) + "\" fill=\"none\"/>";
  for (double t : Ticks(f.ymin, f.ymax, 6)) {
    const double y = f.Y(t);
    s += "<line x1=\"" + Num(kLeft) + "\" x2=\"" + Num(kLeft + f.pw) + "\" y1=\"" + Num(y) +
         "\" y2=\"" + Num(y) + "\" stroke=\"#eee\"/>";
    s += "<text x=\"" + Num(kLeft - 6) + "\" y=\"" + Num(y + 4) +
         "\" text-anchor=\"end\" stroke=\"none\">" + Fixed(t, 4) + "</text>";
  }
  for (double t : Ticks(std::max(1.0, f.xmin), f.xmax, 10)) {
    if (t != std::floor(t)) continue;
    s += "<text x=\"" + Num(f.X(t)) + "\" y=\"" + Num(kTop + f.ph + kCrashStrip + 16) +
         "\" text-anchor=\"middle\" stroke=\"none\">" + Fixed(t, 0) + "</text>";
  }
  s += "<text x=\"" + Num(kLeft + f.pw / 2) + "\" y=\"" + Num(f.h - 10) +
       "\" text-anchor=\"middle\" stroke=\"none\">experiment #</text>";
  s += "<text transform=\"translate(16," + Num(kTop + f.ph / 2) +
       ") rotate(-90)\" text-anchor=\"middle\" stroke=\"none\">val_bpb (lower is better)</text>";
  return s + "</g>";
}

// The running best over kept points (every measured point when none is kept), as a step line
// from its first point to the right edge.
std::string RunningBest(const ProgressPlot& plot, const Frame& f, double cap) {
  const bool any_kept =
      std::any_of(plot.points.begin(), plot.points.end(),
                  [](const ProgressPoint& p) { return p.kind == ProgressPointKind::kKept; });
  std::string d;
  double best = std::numeric_limits<double>::infinity();
  for (const auto& p : plot.points) {
    if (!Measured(p) || p.val_bpb > cap) continue;
    if (any_kept && p.kind != ProgressPointKind::kKept) continue;
    if (p.val_bpb >= best) continue;
    const double x = f.X(p.index), y = f.Y(p.val_bpb);
    d += d.empty() ? "M" + Num(x) + " " + Num(y) : " H" + Num(x) + " V" + Num(y);
    best = p.val_bpb;
  }
  if (d.empty()) return "";
  d += " H" + Num(kLeft + f.pw);
  return std::string("<path class=\"running-best\" data-over=\"") + (any_kept ? "kept" : "all") +
         "\" d=\"" + d + "\" fill=\"none\" stroke=\"#2ca02c\" stroke-width=\"2\"/>";
}

std::string Marker(const ProgressPoint& p, const Frame& f, double cap) {
  const std::string tip = "<title>#" + std::to_string(p.experiment_id) + " " + HtmlEscape(p.label) +
                          (Measured(p) ? ": " + Fixed(p.val_bpb, 6) : ": crashed") + "</title>";
  const double x = PointX(f, p);
  if (p.kind == ProgressPointKind::kCrash) {
    const double y = kTop + f.ph + kCrashStrip / 2, r = 4;
    return "<g class=\"marker crash\" stroke=\"#d62728\" stroke-width=\"2\">" + tip +
           "<path d=\"M" + Num(x - r) + " " + Num(y - r) + " L" + Num(x + r) + " " + Num(y + r) +
           " M" + Num(x - r) + " " + Num(y + r) + " L" + Num(x + r) + " " + Num(y - r) + "\"/></g>";
  }
  if (p.val_bpb > cap) {
    const double y = kTop + 2;
    return std::string("<g class=\"marker clipped ") + KindClass(p.kind) + "\" fill=\"#ff7f0e\">" +
           tip + "<path d=\"M" + Num(x) + " " + Num(y) + " L" + Num(x - 5) + " " + Num(y + 8) +
           " L" + Num(x + 5) + " " + Num(y + 8) + " Z\"/></g>";
  }
  const double y = f.Y(p.val_bpb);
  std::string style;
  switch (p.kind) {
    case ProgressPointKind::kKept:
      style = "r=\"5\" fill=\"#2ca02c\"";
      break;
    case ProgressPointKind::kDiscarded:
      style = "r=\"3.5\" fill=\"#bbbbbb\"";
      break;
    case ProgressPointKind::kPending:
      style = "r=\"3.5\" fill=\"none\" stroke=\"#777\"";
      break;
    case ProgressPointKind::kControl:
      style = "r=\"3\" fill=\"#1f77b4\"";
      break;
    case ProgressPointKind::kCrash:
      break;
  }
  return std::string("<g class=\"marker ") + KindClass(p.kind) + "\">" + tip + "<circle cx=\"" +
         Num(x) + "\" cy=\"" + Num(y) + "\" " + style + "/></g>";
}

std::string Annotation(const ProgressPoint& p, const Frame& f) {
  const double x = PointX(f, p) + 6, y = f.Y(p.val_bpb) - 6;
  return "<text class=\"annotation\" x=\"" + Num(x) + "\" y=\"" + Num(y) +
         "\" font-size=\"10\" fill=\"#2ca02c\" transform=\"rotate(-30 " + Num(x) + " " + Num(y) +
         ")\">" + HtmlEscape(p.label) + "</text>";
}

std::string Title(const ProgressPlot& plot, const ProgressCounts& c) {
  std::string t = HtmlEscape(plot.campaign) + ": " + std::to_string(c.experiments) +
                  " experiments, " + std::to_string(c.kept) + " kept, " +
                  std::to_string(c.discarded) + " discarded, " + std::to_string(c.crashed) +
                  " crashed";
  if (c.pending > 0) t += ", " + std::to_string(c.pending) + " undecided";
  if (c.controls > 0) t += ", " + std::to_string(c.controls) + " controls";
  if (c.clipped > 0) t += " (" + std::to_string(c.clipped) + " above the axis)";
  return t;
}

}  // namespace

ProgressPlot BuildProgressPlot(const std::string& campaign, const std::vector<ProgressRun>& runs) {
  ProgressPlot plot;
  plot.campaign = campaign;
  std::map<std::pair<int64_t, std::string>, std::pair<int, int>> seen;  // -> index, runs so far
  int indices = 0;
  for (const auto& r : runs) {
    ExperimentState state = ExperimentState::kQueued;
    if (!ParseExperimentState(r.state, &state) || !IsTerminal(state) ||
        state == ExperimentState::kCancelled || r.reused_from_id != 0) {
      continue;
    }
    auto it = seen.find({r.round_id, r.name});
    if (it == seen.end())
      it = seen.emplace(std::make_pair(r.round_id, r.name), std::make_pair(++indices, 0)).first;
    ProgressPoint p;
    p.index = it->second.first;
    p.replicate = it->second.second++;
    const bool measured =
        state == ExperimentState::kSucceeded && r.has_val_bpb && std::isfinite(r.val_bpb);
    p.kind = !measured                                    ? ProgressPointKind::kCrash
             : r.role == ToString(RunRole::kControl)      ? ProgressPointKind::kControl
             : r.decision == ToString(Decision::kKeep)    ? ProgressPointKind::kKept
             : r.decision == ToString(Decision::kDiscard) ? ProgressPointKind::kDiscarded
                                                          : ProgressPointKind::kPending;
    p.val_bpb = measured ? r.val_bpb : NAN;
    p.label = r.name;
    p.experiment_id = r.id;
    plot.points.push_back(std::move(p));
  }
  return plot;
}

double OutlierCap(std::vector<double> values) {
  if (values.size() < 4) return std::numeric_limits<double>::infinity();
  std::sort(values.begin(), values.end());
  auto quantile = [&values](double q) {
    const double pos = q * (values.size() - 1);
    const size_t i = static_cast<size_t>(pos);
    const double frac = pos - i;
    return i + 1 < values.size() ? values[i] * (1 - frac) + values[i + 1] * frac : values[i];
  };
  const double q1 = quantile(0.25), q3 = quantile(0.75);
  if (!(q3 > q1)) return std::numeric_limits<double>::infinity();
  return q3 + 3 * (q3 - q1);
}

ProgressCounts CountProgress(const ProgressPlot& plot) {
  ProgressCounts c;
  std::vector<double> values;
  for (const auto& p : plot.points) {
    if (Measured(p)) values.push_back(p.val_bpb);
  }
  const double cap = OutlierCap(values);
  for (const auto& p : plot.points) {
    ++c.experiments;
    switch (p.kind) {
      case ProgressPointKind::kKept:
        ++c.kept;
        break;
      case ProgressPointKind::kDiscarded:
        ++c.discarded;
        break;
      case ProgressPointKind::kPending:
        ++c.pending;
        break;
      case ProgressPointKind::kControl:
        ++c.controls;
        break;
      case ProgressPointKind::kCrash:
        ++c.crashed;
        break;
    }
    if (Measured(p) && p.val_bpb > cap) ++c.clipped;
  }
  return c;
}

std::string RenderProgressSvg(const ProgressPlot& plot) {
  std::vector<double> values;
  for (const auto& p : plot.points) {
    if (Measured(p)) values.push_back(p.val_bpb);
  }
  const double cap = OutlierCap(values);
  const Frame f = FrameOf(plot, cap);
  const ProgressCounts counts = CountProgress(plot);
  std::string s =
      "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"progress-plot\" width=\"" +
      std::to_string(plot.width) + "\" height=\"" + std::to_string(plot.height) +
      "\" viewBox=\"0 0 " + std::to_string(plot.width) + " " + std::to_string(plot.height) +
      "\" font-family=\"sans-serif\" role=\"img\" aria-label=\"" + Title(plot, counts) + "\">";
  s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>";
  s += "<text class=\"title\" x=\"" + Num(f.w / 2) +
       "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">" + Title(plot, counts) + "</text>";
  if (plot.points.empty()) {
    s += "<text x=\"" + Num(f.w / 2) + "\" y=\"" + Num(f.h / 2) +
         "\" text-anchor=\"middle\" fill=\"#888\">no finished experiments</text>";
    return s + "</svg>\n";
  }
  s += Axes(f);
  s += RunningBest(plot, f, cap);
  for (const auto& p : plot.points) s += Marker(p, f, cap);
  for (const auto& p : plot.points) {
    if (p.kind == ProgressPointKind::kKept && Measured(p) && p.val_bpb <= cap) {
      s += Annotation(p, f);
    }
  }
  return s + "</svg>\n";
}

}  // namespace xv
