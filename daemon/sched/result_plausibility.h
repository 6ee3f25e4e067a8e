// ResultPlausibility: whether the figures a trainer reports (through its worker) can be true,
// decided before the daemon stores them. A trainer's `summary` and `step` events are believed only
// when every figure they carry is plausible:
//   - val_bpb: a finite number > 0 (bits per byte cannot be 0 or negative);
//   - counts (num_steps, total_tokens, num_params, flops_per_token, step, and total_tokens_M /
//     num_params_M x 1e6): integers in [0, 2^63); depth in [0, 2^31);
//   - durations, rates, sizes (training_seconds, total_seconds, tok_per_sec, peak_flops,
//     peak_vram_mb, peak_reserved_mb, dt_ms): finite and >= 0;
//   - mfu_percent, loss, lrm: finite (a negative mfu_percent means unknown);
//   - progress: finite and in [0, 1];
//   - a figure that is present must be a number or null (null or missing: not measured).
// The first figure that fails is named in an InvalidArgument error, its value described without
// quoting more than a number: "val_bpb: a number (-3.5), not a positive finite number". The daemon
// then stores none of the event's figures and ends the attempt `invalid` (failure kind
// implausible_result, this message as its detail), so it is never kept (daemon/store
// attempt_finish.cc, FinishAttempt).
// Also the one place a double becomes an int64 in the daemon's event handling (DoubleToInt64):
// converting NaN, an infinity or a value outside int64 is undefined behaviour in C++.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>

#include <nlohmann/json.hpp>

#include "common/flat_json_object.h"
#include "common/status.h"

namespace xv::sched {

// `v` truncated toward zero when that fits int64; nullopt for NaN, +-inf and anything outside
// [-2^63, 2^63).
std::optional<int64_t> DoubleToInt64(double v);

// A JSON number as int64 (floats truncated toward zero); nullopt for anything else, and for
// numbers outside int64 (large unsigned integers, 1e300).
std::optional<int64_t> JsonInt64(const nlohmann::json& v);

// The figures of a trainer `summary` event, as the results table keeps them. Unset: missing or
// null in the event.
struct ResultFigures {
  std::optional<double> val_bpb;
  std::optional<double> training_seconds;
  std::optional<double> total_seconds;
  std::optional<int64_t> num_steps;
  std::optional<int64_t> total_tokens;  // total_tokens, else total_tokens_M x 1e6
  std::optional<double> tok_per_sec;
  std::optional<double> mfu_percent;
  std::optional<double> peak_flops;
  std::optional<double> peak_vram_mb;
  std::optional<double> peak_reserved_mb;
  std::optional<int64_t> num_params;  // num_params, else num_params_M x 1e6
  std::optional<int64_t> flops_per_token;
  std::optional<int64_t> depth;
};

// Reads and judges the figures of `summary` (a JSON object). Ok with *out filled, or
// InvalidArgument naming the first implausible field (*out then unspecified).
Status ReadResultFigures(const nlohmann::json& summary, ResultFigures* out);

// The figures of a trainer `step` event (metrics table and the experiment's progress).
struct StepFigures {
  int64_t step = 0;  // 0 when missing
  std::optional<double> loss;
  std::optional<double> lrm;
  std::optional<double> dt_ms;
  std::optional<double> tok_per_sec;
  std::optional<double> mfu_percent;
  std::optional<double> progress;
};

// Reads and judges the figures of `step` (a JSON object), as ReadResultFigures.
Status ReadStepFigures(const nlohmann::json& step, StepFigures* out);
// The fast path of ReadStepFigures for a flat object (common/flat_json_object.h): true, with *out
// as ReadStepFigures sets it, exactly when ReadStepFigures of the same text would return Ok; false
// otherwise (the caller then calls ReadStepFigures for the error that names the field).
bool ReadPlausibleStepFigures(const FlatJsonObject& step, StepFigures* out);

}  // namespace xv::sched
