#include "client/views/progress_points.h"

namespace xv::client {

ProgressPlot BuildCampaignProgressPlot(const std::string& campaign,
                                       const std::vector<v1::Experiment>& experiments) {
  std::vector<ProgressRun> runs;
  runs.reserve(experiments.size());
  for (const auto& e : experiments) {
    ProgressRun r;
    r.id = e.id();
    r.round_id = e.round_id();
    r.name = e.name();
    r.state = e.state();
    r.decision = e.decision();
    r.role = e.role();
    r.has_val_bpb = e.has_result();
    r.val_bpb = e.has_result() ? e.result().val_bpb() : 0;
    r.reused_from_id = e.reused_from_id();
    runs.push_back(std::move(r));
  }
  return BuildProgressPlot(campaign, runs);
}

}  // namespace xv::client
