// ProgressPlot: upstream autoresearch's progress.png as a self-contained SVG (no scripts, no
// external assets), drawn the same by `xvctl plot` and the dashboard's campaign page. Experiment
// index on x, val_bpb on y (lower is better); the running best over the kept runs as a step line
// (over every measured run when nothing was kept); kept runs annotated with their candidate name;
// crashes marked as red crosses on a strip below the axis; values above an outlier cap
// (q3 + 3 IQR of the measured values) clipped to the top edge as triangles that name their value;
// replicates of one candidate share an index and are spread sideways (jittered); a title with the
// counts. Structural hooks for tests and styling: the step line is <path class="running-best">,
// markers are <g class="marker KIND"> (kept, discarded, pending, control, crash, clipped),
// annotations <text class="annotation">. Every text is XML-escaped.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace xv {

enum class ProgressPointKind { kKept, kDiscarded, kPending, kControl, kCrash };

struct ProgressPoint {
  int index = 0;       // experiment index on x (1-based); replicates share one
  int replicate = 0;   // 0, 1, 2 ... within the index: the sideways offset
  double val_bpb = 0;  // ignored for a crash
  ProgressPointKind kind = ProgressPointKind::kPending;
  std::string label;          // the candidate name (annotation of a kept point, tooltip)
  int64_t experiment_id = 0;  // tooltip
};

struct ProgressPlot {
  std::string campaign;  // the title's subject
  int width = 960;
  int height = 480;
  std::vector<ProgressPoint> points;  // in index order
};

// One experiment as the plot needs it: the neutral form both xvctl (from the API's Experiment) and
// the dashboard (from the store's rows) fill, so that both draw the same picture.
struct ProgressRun {
  int64_t id = 0;
  int64_t round_id = 0;
  std::string name;      // the candidate name
  std::string state;     // common/run_states.h names
  std::string decision;  // keep | discard | pending | control | ""
  std::string role;      // candidate | control
  bool has_val_bpb = false;
  double val_bpb = 0;
  int64_t reused_from_id = 0;
};

// The plot of `runs` (in id order): one x index per candidate of a round (replicates share it and
// are numbered for the jitter); kind from the state and decision (a control is a run of the head;
// a run that did not succeed with a finite val_bpb is a crash); unfinished, cancelled and reused
// runs are left out (a reused run's figures are another run's).
ProgressPlot BuildProgressPlot(const std::string& campaign, const std::vector<ProgressRun>& runs);

// Counts shown in the title.
struct ProgressCounts {
  int experiments = 0, kept = 0, discarded = 0, pending = 0, controls = 0, crashed = 0, clipped = 0;
};

ProgressCounts CountProgress(const ProgressPlot& plot);

// The outlier cap of `values` (q3 + 3 IQR; +inf for fewer than 4 values or a zero IQR).
double OutlierCap(std::vector<double> values);

// The plot as one <svg> element (see the top of this file). With no point it says "no finished
// experiments".
std::string RenderProgressSvg(const ProgressPlot& plot);

}  // namespace xv
