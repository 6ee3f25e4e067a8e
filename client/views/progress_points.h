// The progress plot (common/progress_plot.h) of a campaign from the API's experiments.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "common/progress_plot.h"
#include "xv/v1/types.pb.h"

namespace xv::client {

// ProgressRun per experiment (id order kept), then xv::BuildProgressPlot.
ProgressPlot BuildCampaignProgressPlot(const std::string& campaign,
                                       const std::vector<v1::Experiment>& experiments);

}  // namespace xv::client
