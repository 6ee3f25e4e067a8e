// How xvctl shows experiments: the results table, the JSON objects of --json, terminal states.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "xv/v1/types.pb.h"

namespace xv::client {

// succeeded | diverged | failed | invalid | cancelled | timed_out | lost
bool IsTerminalState(const std::string& state);

// One experiment as JSON: ids, name, state, failure, decision, device and the result figures
// (val_bpb, tok_per_sec, mfu_percent, num_steps, training_seconds, total_seconds ...; null when the
// experiment has no result, mfu_percent null when unknown).
nlohmann::json ExperimentJson(const v1::Experiment& e);

// Peak allocated memory in GB (MB / 1024) with one decimal; "-" without a result or a measurement.
std::string MemoryGbCell(const v1::Experiment& e);

// The results table: id, name, state, val_bpb (6 decimals), mem GB, tok/s (thousands separators),
// MFU, steps, seconds, device, decision, reason (the experiment's decision reason, else the round's
// one-line decision summary, "-" when neither). Fitted to `max_width` display columns
// (TextTable::RenderFitting: columns left out by priority, name and reason cut); 0 = every column.
std::string RenderResultsTable(const std::vector<v1::Experiment>& experiments,
                               size_t max_width = 0);

}  // namespace xv::client
