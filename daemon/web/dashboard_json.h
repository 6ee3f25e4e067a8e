// The dashboard's JSON endpoints (/api/...): the same data as the HTML pages. Stored messages are
// written in protobuf's JSON mapping with the .proto field names (64-bit integers as strings, as
// that mapping does), plus the figures the pages compute (heartbeat age, MFU against the measured
// ceiling, the loss curve). Thread-safety: pure functions.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "daemon/web/dashboard_reader.h"

namespace xv::daemon::web {

// A stored message as JSON (protobuf mapping, .proto names, default values included).
nlohmann::json MessageJson(const google::protobuf::Message& message);

// {"experiments_by_state": {...}, "queue_depth": N, "read_only_mode": bool, "write_fault": "...",
//  "workers": [...], "campaigns": [...], "recent_experiments": [...]}
nlohmann::json OverviewJson(const OverviewData& data, const std::string& write_fault);
// {"campaign": {..., rounds, head_history}, "decisions": [{round_id, ...decision_json}],
//  "experiments": [...], "experiments_truncated": bool}
nlohmann::json CampaignJson(const CampaignPageData& data);
// {"experiment": {...}, "figures": {...}, "loss_curve": [{step, loss, tok_per_sec}], ...}
nlohmann::json ExperimentJson(const ExperimentPageData& data);

// MFU against the worker's measured matmul ceiling: flops/token x tok/s / measured peak, in
// percent; nullopt when the worker did not probe or a figure is missing.
std::optional<double> MeasuredMfuPercent(const xv::v1::Result& r);

}  // namespace xv::daemon::web
