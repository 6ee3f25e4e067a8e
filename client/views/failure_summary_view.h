// How `xvctl results --failures` shows a FailureSummary: per knob value, how its runs ended.
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "xv/v1/experiments.pb.h"

namespace xv::client {

// Columns knob, value, runs, diverged, crashed, timed_out, NaN rate (percent, 1 decimal).
std::string RenderFailureSummary(const std::vector<v1::KnobFailure>& knobs);

// {"failures": [{"knob","value","runs","diverged","crashed","timed_out","nan_runs","nan_rate"}]}
nlohmann::json FailureSummaryJson(const std::vector<v1::KnobFailure>& knobs);

}  // namespace xv::client
