// The progress plot's SVG, checked structurally: the running-best step line and what it runs
// over, kept annotations, crash, clipped and replicate markers, the title's counts, escaping.
#include "common/progress_plot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <regex>

namespace xv {
namespace {

ProgressPoint Point(int index, double val_bpb, ProgressPointKind kind, const std::string& label,
                    int replicate = 0) {
  ProgressPoint p;
  p.index = index;
  p.val_bpb = val_bpb;
  p.kind = kind;
  p.label = label;
  p.replicate = replicate;
  p.experiment_id = index * 10 + replicate;
  return p;
}

int Count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t pos = s.find(what); pos != std::string::npos; pos = s.find(what, pos + 1)) ++n;
  return n;
}

ProgressPlot Campaign() {
  using K = ProgressPointKind;
  ProgressPlot plot;
  plot.campaign = "lr <sweep>";
  plot.points = {Point(1, 1.00, K::kKept, "base"),
                 Point(2, 0.99, K::kKept, "matrix_lr=0.04"),
                 Point(3, 1.01, K::kDiscarded, "gelu"),
                 Point(4, NAN, K::kCrash, "n_embd=1536"),
                 Point(5, 0.985, K::kDiscarded, "softcap=30", 0),
                 Point(5, 0.987, K::kDiscarded, "softcap=30", 1),
                 Point(6, 0.98, K::kKept, "x0_lambda=0.2"),
                 Point(7, 9.5, K::kDiscarded, "matrix_lr=0.5 (outlier)"),
                 Point(8, 0.995, K::kControl, "head")};
  return plot;
}

TEST(ProgressPlot, RunningBestStepsDownAtEachKeptImprovementToTheRightEdge) {
  const std::string svg = RenderProgressSvg(Campaign());
  std::smatch m;
  ASSERT_TRUE(std::regex_search(svg, m,
                                std::regex("<path class=\"running-best\" "
                                           "data-over=\"kept\" d=\"([^\"]*)\"")))
      << svg;
  const std::string d = m[1];
  // Start at the first kept run, then two steps down (indices 2 and 6), then to the right edge.
  EXPECT_EQ(d.rfind("M", 0), 0u) << d;
  EXPECT_EQ(Count(d, " V"), 2) << d;
  EXPECT_EQ(Count(d, " H"), 3) << d;
  // The discarded 0.985 at index 5 is lower than the kept 0.99 but does not move the line.
  std::regex v(" V([0-9.]+)");
  std::vector<double> ys;
  for (auto it = std::sregex_iterator(d.begin(), d.end(), v); it != std::sregex_iterator(); ++it) {
    ys.push_back(std::stod((*it)[1]));
  }
  ASSERT_EQ(ys.size(), 2u);
  EXPECT_GT(ys[1], ys[0]);  // SVG y grows downwards: the lower val_bpb (0.98) is drawn lower
}

TEST(ProgressPlot, KeptRunsAreAnnotatedAndEveryRunHasItsMarker) {
  const std::string svg = RenderProgressSvg(Campaign());
  EXPECT_EQ(Count(svg, "<text class=\"annotation\""), 3) << svg;
  EXPECT_NE(svg.find(">matrix_lr=0.04</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">x0_lambda=0.2</text>"), std::string::npos) << svg;
  EXPECT_EQ(svg.find(">gelu</text>"), std::string::npos) << "discarded runs are not annotated";
  EXPECT_EQ(Count(svg, "<g class=\"marker kept\""), 3);
  EXPECT_EQ(Count(svg, "<g class=\"marker discarded\""), 3);
  EXPECT_EQ(Count(svg, "<g class=\"marker control\""), 1);
  EXPECT_EQ(Count(svg, "<g class=\"marker crash\""), 1);
  EXPECT_NE(svg.find("#40 n_embd=1536: crashed"), std::string::npos) << svg;
}

TEST(ProgressPlot, AnOutlierIsClippedToTheTopEdgeAndTheRestKeepsTheScale) {
  const std::string svg = RenderProgressSvg(Campaign());
  ASSERT_EQ(Count(svg, "<g class=\"marker clipped discarded\""), 1) << svg;
  EXPECT_NE(svg.find("matrix_lr=0.5 (outlier): 9.500000"), std::string::npos);
  // The y ticks stay near the real values: no tick label at or above 2.
  std::regex tick(">([0-9]+\\.[0-9]{4})</text>");
  int ticks = 0;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), tick); it != std::sregex_iterator();
       ++it) {
    EXPECT_LT(std::stod((*it)[1]), 1.1) << (*it)[0];
    ++ticks;
  }
  EXPECT_GE(ticks, 3);
}

TEST(ProgressPlot, ReplicatesShareTheirIndexSpreadSideways) {
  const std::string svg = RenderProgressSvg(Campaign());
  std::regex rep("<title>#5([01]) softcap=30: [0-9.]+</title><circle cx=\"([0-9.]+)\"");
  std::vector<double> xs;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), rep); it != std::sregex_iterator();
       ++it) {
    xs.push_back(std::stod((*it)[2]));
  }
  ASSERT_EQ(xs.size(), 2u) << svg;
  EXPECT_NE(xs[0], xs[1]);
  EXPECT_LT(std::fabs(xs[0] - xs[1]), 20.0);  // jittered, not a column apart (~100 px)
}

TEST(ProgressPlot, TitleCountsAndEscapes) {
  const std::string svg = RenderProgressSvg(Campaign());
  EXPECT_NE(svg.find("lr &lt;sweep&gt;: 9 experiments, 3 kept, 4 discarded, 1 crashed, 1 controls "
                     "(1 above the axis)"),
            std::string::npos)
      << svg;
  EXPECT_EQ(svg.find("<sweep>"), std::string::npos);
}

TEST(ProgressPlot, WithNothingKeptTheLineRunsOverEveryMeasuredRun) {
  using K = ProgressPointKind;
  ProgressPlot plot;
  plot.campaign = "default";
  plot.points = {Point(1, 1.2, K::kPending, "a"), Point(2, 1.1, K::kPending, "b")};
  const std::string svg = RenderProgressSvg(plot);
  EXPECT_NE(svg.find("class=\"running-best\" data-over=\"all\""), std::string::npos) << svg;
  EXPECT_EQ(Count(svg, "<text class=\"annotation\""), 0);
  plot.points.clear();
  EXPECT_NE(RenderProgressSvg(plot).find("no finished experiments"), std::string::npos);
}

ProgressRun RunOf(int64_t id, int64_t round, const std::string& name, const std::string& state,
                  const std::string& decision, double val_bpb) {
  ProgressRun r;
  r.id = id;
  r.round_id = round;
  r.name = name;
  r.state = state;
  r.decision = decision;
  r.role = name == "head" ? "control" : "candidate";
  r.has_val_bpb = state == "succeeded";
  r.val_bpb = val_bpb;
  return r;
}

TEST(ProgressPlot, RunsBecomeOneIndexPerCandidateOfARoundLeavingOutReusedAndUnfinished) {
  ProgressRun reused = RunOf(6, 2, "lr=0.02", "succeeded", "discard", 1.2);
  reused.reused_from_id = 1;
  const ProgressPlot plot =
      BuildProgressPlot("c", {RunOf(1, 1, "lr=0.02", "succeeded", "keep", 1.2),
                              RunOf(2, 1, "lr=0.02", "succeeded", "keep", 1.21),
                              RunOf(3, 1, "head", "succeeded", "control", 1.4),
                              RunOf(4, 1, "lr=0.06", "diverged", "discard", 0),
                              RunOf(5, 2, "lr=0.03", "running", "pending", 0), reused,
                              RunOf(7, 2, "lr=0.01", "cancelled", "pending", 0),
                              RunOf(8, 2, "lr=0.02", "succeeded", "pending", 1.19)});
  ASSERT_EQ(plot.points.size(), 5u);
  using K = ProgressPointKind;
  EXPECT_EQ(plot.points[0].index, 1);
  EXPECT_EQ(plot.points[1].index, 1);  // a replicate of the same candidate
  EXPECT_EQ(plot.points[1].replicate, 1);
  EXPECT_EQ(plot.points[0].kind, K::kKept);
  EXPECT_EQ(plot.points[2].kind, K::kControl);
  EXPECT_EQ(plot.points[2].index, 2);
  EXPECT_EQ(plot.points[3].kind, K::kCrash);
  EXPECT_EQ(plot.points[4].index, 4);  // the same name in another round: a new index
  EXPECT_EQ(plot.points[4].kind, K::kPending);
  EXPECT_EQ(plot.points[4].experiment_id, 8);
}

TEST(ProgressPlot, OutlierCapIsQ3PlusThreeIqr) {
  EXPECT_TRUE(std::isinf(OutlierCap({1, 2, 3})));
  EXPECT_DOUBLE_EQ(OutlierCap({1, 2, 3, 4, 5}), 4 + 3 * 2);
}

}  // namespace
}  // namespace xv
