#include "daemon/web/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/html_escape.h"

namespace xv::daemon::web {
namespace {

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string TickLabel(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", std::fabs(v) < 1e-12 ? 0.0 : v);
  return buf;
}

}  // namespace

std::vector<double> NiceTicks(double lo, double hi, int max_ticks) {
  std::vector<double> ticks;
  if (!(hi > lo) || max_ticks < 1) {
    ticks.push_back(lo);
    return ticks;
  }
  const double raw = (hi - lo) / max_ticks;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * mag;
    if (step >= raw) break;
  }
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) {
    ticks.push_back(t);
    if (ticks.size() > static_cast<size_t>(max_ticks) + 2) break;
  }
  return ticks;
}

namespace {

// The plot area inside the margins and the data range it shows, with the mapping between them.
struct PlotFrame {
  static constexpr double kLeft = 64, kRight = 16, kTop = 28, kBottom = 40;
  double w = 0, h = 0, pw = 0, ph = 0;  // the image, and the plot area inside the margins
  double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
  double X(double x) const { return kLeft + (x - xmin) / (xmax - xmin) * pw; }
  double Y(double y) const { return kTop + (1 - (y - ymin) / (ymax - ymin)) * ph; }
};

// The frame of `plot`: the range of its finite points (xmin stays infinite when there is none),
// widened so that a single value still spans the area and the curve does not touch the edges.
PlotFrame FrameOf(const SvgPlot& plot) {
  PlotFrame f;
  f.w = plot.width;
  f.h = plot.height;
  f.pw = f.w - PlotFrame::kLeft - PlotFrame::kRight;
  f.ph = f.h - PlotFrame::kTop - PlotFrame::kBottom;
  for (const PlotSeries& s : plot.series) {
    for (const PlotPoint& p : s.points) {
      if (!std::isfinite(p.x) || !std::isfinite(p.y)) continue;
      f.xmin = std::min(f.xmin, p.x);
      f.xmax = std::max(f.xmax, p.x);
      f.ymin = std::min(f.ymin, p.y);
      f.ymax = std::max(f.ymax, p.y);
    }
  }
  if (!std::isfinite(f.xmin)) return f;
  if (f.xmax == f.xmin) {
    f.xmin -= 1;
    f.xmax += 1;
  }
  const double pad =
      f.ymax == f.ymin ? std::max(std::fabs(f.ymin) * 0.01, 1e-6) : (f.ymax - f.ymin) * 0.05;
  f.ymin -= pad;
  f.ymax += pad;
  return f;
}

// The border, the y grid with its labels, the x tick labels and the axis names.
std::string Axes(const SvgPlot& plot, const PlotFrame& f) {
  const double left = PlotFrame::kLeft, top = PlotFrame::kTop;
  std::string out = "<rect x=\"" + Num(left) + "\" y=\"" + Num(top) + "\" width=\"" + Num(f.pw) +
                    "\" height=\"" + Num(f.ph) + "\" fill=\"none\" stroke=\"#999\"/>";
  for (double t : NiceTicks(f.ymin, f.ymax, 5)) {
    out += "<line x1=\"" + Num(left) + "\" x2=\"" + Num(left + f.pw) + "\" y1=\"" + Num(f.Y(t)) +
           "\" y2=\"" + Num(f.Y(t)) + "\" stroke=\"#eee\"/>";
    out += "<text x=\"" + Num(left - 4) + "\" y=\"" + Num(f.Y(t) + 4) +
           "\" text-anchor=\"end\" class=\"tick\">" + TickLabel(t) + "</text>";
  }
  for (double t : NiceTicks(f.xmin, f.xmax, 6)) {
    if (plot.integer_x && t != std::floor(t)) continue;
    out += "<text x=\"" + Num(f.X(t)) + "\" y=\"" + Num(top + f.ph + 14) +
           "\" text-anchor=\"middle\" class=\"tick\">" + TickLabel(t) + "</text>";
  }
  out += "<text x=\"" + Num(left + f.pw / 2) + "\" y=\"" + Num(f.h - 6) +
         "\" text-anchor=\"middle\" class=\"axis\">" + HtmlEscape(plot.x_label) + "</text>";
  out += "<text x=\"12\" y=\"" + Num(top + f.ph / 2) +
         "\" text-anchor=\"middle\" transform=\"rotate(-90 12 " + Num(top + f.ph / 2) +
         ")\" class=\"axis\">" + HtmlEscape(plot.y_label) + "</text>";
  return out;
}

// The series' names and colours, right-aligned above the plot area.
std::string Legend(const SvgPlot& plot, const PlotFrame& f) {
  std::string out;
  double legend_x = PlotFrame::kLeft + f.pw;
  for (auto it = plot.series.rbegin(); it != plot.series.rend(); ++it) {
    const PlotSeries& s = *it;
    const double text_w = 7.0 * static_cast<double>(s.label.size()) + 18;
    legend_x -= text_w;
    out += "<rect x=\"" + Num(legend_x) + "\" y=\"8\" width=\"10\" height=\"10\" fill=\"" +
           s.color + "\"/><text x=\"" + Num(legend_x + 13) + "\" y=\"17\" class=\"legend\">" +
           HtmlEscape(s.label) + "</text>";
  }
  return out;
}

// One series: its line (if drawn as one) and its points (every point of a scatter; on a line only
// those with a tip).
std::string Series(const PlotSeries& s, const PlotFrame& f) {
  std::string out;
  if (s.line) {
    std::string pts;
    for (const PlotPoint& p : s.points) {
      if (!std::isfinite(p.x) || !std::isfinite(p.y)) continue;
      pts += Num(f.X(p.x)) + "," + Num(f.Y(p.y)) + " ";
    }
    out += "<polyline fill=\"none\" stroke=\"" + s.color + "\" stroke-width=\"1.5\" points=\"" +
           pts + "\"/>";
  }
  for (const PlotPoint& p : s.points) {
    if (!std::isfinite(p.x) || !std::isfinite(p.y)) continue;
    if (s.line && p.tip.empty()) continue;
    out += "<circle cx=\"" + Num(f.X(p.x)) + "\" cy=\"" + Num(f.Y(p.y)) + "\" r=\"" +
           (s.line ? "2" : "3.5") + "\" fill=\"" + s.color + "\">";
    if (!p.tip.empty()) out += "<title>" + HtmlEscape(p.tip) + "</title>";
    out += "</circle>";
  }
  return out;
}

}  // namespace

std::string RenderSvgPlot(const SvgPlot& plot) {
  const PlotFrame f = FrameOf(plot);
  std::string out = "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"plot\" width=\"" +
                    std::to_string(plot.width) + "\" height=\"" + std::to_string(plot.height) +
                    "\" viewBox=\"0 0 " + std::to_string(plot.width) + " " +
                    std::to_string(plot.height) + "\" role=\"img\" aria-label=\"" +
                    HtmlEscape(plot.title) + "\">";
  out += "<text x=\"" + Num(PlotFrame::kLeft) + "\" y=\"16\" class=\"plot-title\">" +
         HtmlEscape(plot.title) + "</text>";
  if (!std::isfinite(f.xmin)) {
    return out + "<text x=\"" + Num(f.w / 2) + "\" y=\"" + Num(f.h / 2) +
           "\" text-anchor=\"middle\" class=\"plot-empty\">no data</text></svg>";
  }
  out += Axes(plot, f);
  out += Legend(plot, f);
  for (const PlotSeries& s : plot.series) out += Series(s, f);
  return out + "</svg>";
}

}  // namespace xv::daemon::web
