// How xvctl shows device health, energy and the measured ceilings: the figures of a result's
// DeviceHealth (issue 6), tokens per joule, MFU against the worker's probed matmul ceiling as well
// as the datasheet peak (issue 3), and the workers' probe figures.
// Unmeasured figures are JSON null and "-" in tables, never 0.
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "xv/v1/experiments.pb.h"
#include "xv/v1/types.pb.h"

namespace xv::client {

// total_tokens / energy_j; nullopt when either is unknown.
std::optional<double> TokensPerJoule(const v1::Result& r);

// MFU (%) against the worker's measured matmul ceiling: mfu * datasheet_peak / measured_peak when
// both peaks are known, else 100 * flops_per_token * tok_per_sec / measured_peak; nullopt without
// a measured peak.
std::optional<double> MeasuredMfuPercent(const v1::Result& r);

// Adds to an experiment's JSON object: health_source, health_samples, avg_power_w, energy_j,
// tokens_per_joule, peak_temp_c, throttle_events, throttled_seconds, throttled, throttle_reasons,
// energy_method, measured_peak_flops, mfu_measured_percent, start_temp_c, thermal_wait_s. All null
// when `r` is null (no result); the health figures are null when the source did not measure them.
void AddHealthJson(const v1::Result* r, nlohmann::json* j);

// The results table's energy cell: "41.2 kJ", "812 J", "-" when not measured; " throttled" is
// appended when the run saw a thermal/hardware slowdown.
std::string EnergyCell(const v1::Result& r);
// "1,234" tokens per joule, or "-".
std::string TokensPerJouleCell(const v1::Result& r);

// A worker's probe as JSON: {"matmul_tflops", "bandwidth_gb_per_s"} (null when not probed).
nlohmann::json WorkerProbeJson(const v1::WorkerInfo& w);
// The workers table: worker, state, device, backend, matmul TFLOP/s, bandwidth GB/s, datasheet
// peak TFLOP/s, experiment, last heartbeat.
std::string RenderWorkersTable(const std::vector<v1::WorkerInfo>& workers);

}  // namespace xv::client
