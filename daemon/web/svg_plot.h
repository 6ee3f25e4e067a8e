// SvgPlot: a small x/y chart rendered as inline SVG (no scripts, no external assets), for the
// dashboard's val_bpb-over-rounds and loss curves. Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

namespace xv::daemon::web {

struct PlotPoint {
  double x = 0;
  double y = 0;
  std::string tip;  // tooltip (<title>) of a marker; "" = none. Escaped when rendered.
};

struct PlotSeries {
  std::string label;  // legend text, escaped when rendered
  std::string color;  // a CSS colour written by the caller (never from the database), "#1f77b4"
  bool line = true;   // true: a polyline through the points in order; false: markers only
  std::vector<PlotPoint> points;
};

struct SvgPlot {
  std::string title;  // aria label and heading inside the SVG
  std::string x_label;
  std::string y_label;
  int width = 640;
  int height = 280;
  bool integer_x = false;  // x ticks at whole numbers only (rounds)
  std::vector<PlotSeries> series;
};

// The chart as one <svg> element. Non-finite points are left out; with no finite point at all the
// SVG says "no data". Every caller-supplied text is HTML-escaped.
std::string RenderSvgPlot(const SvgPlot& plot);

// Up to `max_ticks` + 1 round tick values covering [lo, hi] (1, 2, 5 x 10^k steps).
std::vector<double> NiceTicks(double lo, double hi, int max_ticks);

}  // namespace xv::daemon::web
