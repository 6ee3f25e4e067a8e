// How xvctl shows the daemon's Status response as JSON: `status --json` and `workers --json` (and
// the status and workers tools of `xvctl mcp`). Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "xv/v1/experiments.pb.h"

namespace xv::client {

// `status --json`: address (the one dialled), version, database, queued, running, finished,
// workers (id, name, state, device, backend, current_experiment_id, last_heartbeat, probe,
// trainers), active (ExperimentJson of each assigned or running experiment), write_mode
// ("read-write" or the daemon's read-only text) and unserved_trainers ({trainer, queued}).
nlohmann::json StatusJson(const v1::StatusResponse& resp, const std::string& address);

// `workers --json`: {"workers": [...]}, each with id, name, state, device, vendor, backend,
// current_experiment_id, last_heartbeat, probe (WorkerProbeJson) and probe_json (the worker's
// whole probe, parsed; null when it did not probe).
nlohmann::json WorkersJson(const v1::StatusResponse& resp);

}  // namespace xv::client
