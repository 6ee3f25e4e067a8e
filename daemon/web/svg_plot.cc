#include "daemon/web/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "daemon/web/html_escape.h"

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

std::string RenderSvgPlot(const SvgPlot& plot) {
  const double left = 64, right = 16, top = 28, bottom = 40;
  const double w = plot.width, h = plot.height;
  const double pw = w - left - right, ph = h - top - bottom;
  double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
  for (const PlotSeries& s : plot.series) {
    for (const PlotPoint& p : s.points) {
      if (!std::isfinite(p.x) || !std::isfinite(p.y)) continue;
      xmin = std::min(xmin, p.x);
      xmax = std::max(xmax, p.x);
      ymin = std::min(ymin, p.y);
      ymax = std::max(ymax, p.y);
    }
  }
  std::string out = "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"plot\" width=\"" +
                    std::to_string(plot.width) + "\" height=\"" + std::to_string(plot.height) +
                    "\" viewBox=\"0 0 " + std::to_string(plot.width) + " " +
                    std::to_string(plot.height) + "\" role=\"img\" aria-label=\"" +
                    HtmlEscape(plot.title) + "\">";
  out += "<text x=\"" + Num(left) + "\" y=\"16\" class=\"plot-title\">" + HtmlEscape(plot.title) +
         "</text>";
  if (!std::isfinite(xmin)) {
    out += "<text x=\"" + Num(w / 2) + "\" y=\"" + Num(h / 2) +
           "\" text-anchor=\"middle\" class=\"plot-empty\">no data</text></svg>";
    return out;
  }
  if (xmax == xmin) {
    xmin -= 1;
    xmax += 1;
  }
  if (ymax == ymin) {
    const double pad = std::max(std::fabs(ymin) * 0.01, 1e-6);
    ymin -= pad;
    ymax += pad;
  } else {
    const double pad = (ymax - ymin) * 0.05;
    ymin -= pad;
    ymax += pad;
  }
  auto px = [&](double x) { return left + (x - xmin) / (xmax - xmin) * pw; };
  auto py = [&](double y) { return top + (1 - (y - ymin) / (ymax - ymin)) * ph; };

  out += "<rect x=\"" + Num(left) + "\" y=\"" + Num(top) + "\" width=\"" + Num(pw) +
         "\" height=\"" + Num(ph) + "\" fill=\"none\" stroke=\"#999\"/>";
  for (double t : NiceTicks(ymin, ymax, 5)) {
    out += "<line x1=\"" + Num(left) + "\" x2=\"" + Num(left + pw) + "\" y1=\"" + Num(py(t)) +
           "\" y2=\"" + Num(py(t)) + "\" stroke=\"#eee\"/>";
    out += "<text x=\"" + Num(left - 4) + "\" y=\"" + Num(py(t) + 4) +
           "\" text-anchor=\"end\" class=\"tick\">" + TickLabel(t) + "</text>";
  }
  for (double t : NiceTicks(xmin, xmax, 6)) {
    if (plot.integer_x && t != std::floor(t)) continue;
    out += "<text x=\"" + Num(px(t)) + "\" y=\"" + Num(top + ph + 14) +
           "\" text-anchor=\"middle\" class=\"tick\">" + TickLabel(t) + "</text>";
  }
  out += "<text x=\"" + Num(left + pw / 2) + "\" y=\"" + Num(h - 6) +
         "\" text-anchor=\"middle\" class=\"axis\">" + HtmlEscape(plot.x_label) + "</text>";
  out += "<text x=\"12\" y=\"" + Num(top + ph / 2) +
         "\" text-anchor=\"middle\" transform=\"rotate(-90 12 " + Num(top + ph / 2) +
         ")\" class=\"axis\">" + HtmlEscape(plot.y_label) + "</text>";

  double legend_x = left + pw;
  for (auto it = plot.series.rbegin(); it != plot.series.rend(); ++it) {
    const PlotSeries& s = *it;
    const double text_w = 7.0 * static_cast<double>(s.label.size()) + 18;
    legend_x -= text_w;
    out += "<rect x=\"" + Num(legend_x) + "\" y=\"8\" width=\"10\" height=\"10\" fill=\"" +
           s.color + "\"/><text x=\"" + Num(legend_x + 13) + "\" y=\"17\" class=\"legend\">" +
           HtmlEscape(s.label) + "</text>";
  }
  for (const PlotSeries& s : plot.series) {
    if (s.line) {
      std::string pts;
      for (const PlotPoint& p : s.points) {
        if (!std::isfinite(p.x) || !std::isfinite(p.y)) continue;
        pts += Num(px(p.x)) + "," + Num(py(p.y)) + " ";
      }
      out += "<polyline fill=\"none\" stroke=\"" + s.color + "\" stroke-width=\"1.5\" points=\"" +
             pts + "\"/>";
    }
    for (const PlotPoint& p : s.points) {
      if (!std::isfinite(p.x) || !std::isfinite(p.y)) continue;
      if (s.line && p.tip.empty()) continue;
      out += "<circle cx=\"" + Num(px(p.x)) + "\" cy=\"" + Num(py(p.y)) + "\" r=\"" +
             (s.line ? "2" : "3.5") + "\" fill=\"" + s.color + "\">";
      if (!p.tip.empty()) out += "<title>" + HtmlEscape(p.tip) + "</title>";
      out += "</circle>";
    }
  }
  out += "</svg>";
  return out;
}

}  // namespace xv::daemon::web
