// How xvctl shows one event of the daemon's Watch stream as JSON: `watch --json` (one object per
// line) and the events of the experiment tool of `xvctl mcp`. Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>

#include "xv/v1/experiments.pb.h"

namespace xv::client {

// cursor, time, kind, campaign, campaign_id, round_id, experiment_id, attempt, name, and as they
// apply: state, detail, dropped (kind dropped), step (step, eval, nan), loss and tok_per_sec
// (step), val_bpb (summary, eval), event (the stored event JSON, parsed: a trainer event verbatim).
nlohmann::json WatchEventJson(const v1::WatchEvent& ev);

}  // namespace xv::client
