#include "daemon/sched/result_plausibility.h"

#include <cmath>
#include <limits>
#include <string>

#include "common/bounded_json.h"
#include "common/flat_json_object.h"

namespace xv::sched {
namespace {

using nlohmann::json;

constexpr double kTwoPow63 = 9223372036854775808.0;  // exactly representable

Status Implausible(const char* field, const json& v, const char* expected) {
  return Status::InvalidArgument(std::string(field) + ": " + DescribeJsonValue(v) + ", not " +
                                 expected);
}

// The number `field` of `j`: unset when missing or null; InvalidArgument when it is something
// else, or a number that `ok` refuses (`expected` says what it must be).
template <typename Accept>
Status ReadDouble(const json& j, const char* field, Accept ok, const char* expected,
                  std::optional<double>* out) {
  out->reset();
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_number()) return Implausible(field, *it, expected);
  const double v = it->get<double>();
  if (!std::isfinite(v) || !ok(v)) return Implausible(field, *it, expected);
  *out = v;
  return Status::Ok();
}

// As ReadDouble for a count: an integer in [0, max].
Status ReadCount(const json& j, const char* field, int64_t max, std::optional<int64_t>* out) {
  out->reset();
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return Status::Ok();
  const std::optional<int64_t> v = JsonInt64(*it);
  if (!v || *v < 0 || *v > max) {
    return Implausible(field, *it,
                       max == std::numeric_limits<int64_t>::max()
                           ? "a count (an integer >= 0 below 2^63)"
                           : "an integer in [0, 2^31)");
  }
  *out = v;
  return Status::Ok();
}

// A count given in millions (total_tokens_M, num_params_M), when the exact one is absent.
Status ReadMillions(const json& j, const char* field, std::optional<int64_t>* out) {
  std::optional<double> m;
  XV_RETURN_IF_ERROR(ReadDouble(
      j, field, [](double v) { return v >= 0 && v * 1e6 < kTwoPow63; },
      "a count in millions (>= 0, below 2^63 / 1e6)", &m));
  if (m) *out = DoubleToInt64(*m * 1e6);
  return Status::Ok();
}

bool Any(double) { return true; }
bool NonNegative(double v) { return v >= 0; }
bool Fraction(double v) { return v >= 0 && v <= 1; }

// ReadDouble's judgement of a FlatJsonObject member: true (and *out set or reset) exactly where
// ReadDouble would return Ok on the same text.
template <typename Accept>
bool PlausibleDouble(const FlatJsonObject& j, const char* field, Accept ok,
                     std::optional<double>* out) {
  out->reset();
  const FlatJsonObject::Member* m = j.Find(field);
  if (m == nullptr || m->kind == FlatJsonObject::Kind::kNull) return true;
  if (!m->is_number() || !std::isfinite(m->number) || !ok(m->number)) return false;
  *out = m->number;
  return true;
}

// ReadCount's judgement (JsonInt64: a float is truncated) of a FlatJsonObject member.
bool PlausibleCount(const FlatJsonObject& j, const char* field, int64_t max,
                    std::optional<int64_t>* out) {
  out->reset();
  const FlatJsonObject::Member* m = j.Find(field);
  if (m == nullptr || m->kind == FlatJsonObject::Kind::kNull) return true;
  std::optional<int64_t> v;
  if (m->kind == FlatJsonObject::Kind::kInteger) v = m->integer;
  if (m->kind == FlatJsonObject::Kind::kFloat) v = DoubleToInt64(m->number);
  if (!v || *v < 0 || *v > max) return false;
  *out = v;
  return true;
}

}  // namespace

std::optional<int64_t> DoubleToInt64(double v) {
  if (!(v >= -kTwoPow63 && v < kTwoPow63)) return std::nullopt;  // NaN fails both comparisons
  return static_cast<int64_t>(v);
}

std::optional<int64_t> JsonInt64(const json& v) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) return DoubleToInt64(v.get<double>());
  return std::nullopt;
}

Status ReadResultFigures(const json& summary, ResultFigures* out) {
  constexpr int64_t kMaxCount = std::numeric_limits<int64_t>::max();
  const char* const kNonNegative = "a finite number >= 0";
  XV_RETURN_IF_ERROR(ReadDouble(
      summary, "val_bpb", [](double v) { return v > 0; }, "a positive finite number",
      &out->val_bpb));
  XV_RETURN_IF_ERROR(
      ReadDouble(summary, "training_seconds", NonNegative, kNonNegative, &out->training_seconds));
  XV_RETURN_IF_ERROR(
      ReadDouble(summary, "total_seconds", NonNegative, kNonNegative, &out->total_seconds));
  XV_RETURN_IF_ERROR(ReadCount(summary, "num_steps", kMaxCount, &out->num_steps));
  XV_RETURN_IF_ERROR(ReadCount(summary, "total_tokens", kMaxCount, &out->total_tokens));
  if (!out->total_tokens) {
    XV_RETURN_IF_ERROR(ReadMillions(summary, "total_tokens_M", &out->total_tokens));
  }
  XV_RETURN_IF_ERROR(
      ReadDouble(summary, "tok_per_sec", NonNegative, kNonNegative, &out->tok_per_sec));
  XV_RETURN_IF_ERROR(ReadDouble(summary, "mfu_percent", Any, "a finite number", &out->mfu_percent));
  XV_RETURN_IF_ERROR(
      ReadDouble(summary, "peak_flops", NonNegative, kNonNegative, &out->peak_flops));
  XV_RETURN_IF_ERROR(
      ReadDouble(summary, "peak_vram_mb", NonNegative, kNonNegative, &out->peak_vram_mb));
  XV_RETURN_IF_ERROR(
      ReadDouble(summary, "peak_reserved_mb", NonNegative, kNonNegative, &out->peak_reserved_mb));
  XV_RETURN_IF_ERROR(ReadCount(summary, "num_params", kMaxCount, &out->num_params));
  if (!out->num_params) {
    XV_RETURN_IF_ERROR(ReadMillions(summary, "num_params_M", &out->num_params));
  }
  XV_RETURN_IF_ERROR(ReadCount(summary, "flops_per_token", kMaxCount, &out->flops_per_token));
  XV_RETURN_IF_ERROR(ReadCount(summary, "depth", std::numeric_limits<int32_t>::max(), &out->depth));
  return Status::Ok();
}

Status ReadStepFigures(const json& step, StepFigures* out) {
  const char* const kNonNegative = "a finite number >= 0";
  std::optional<int64_t> n;
  XV_RETURN_IF_ERROR(ReadCount(step, "step", std::numeric_limits<int64_t>::max(), &n));
  out->step = n.value_or(0);
  XV_RETURN_IF_ERROR(ReadDouble(step, "loss", Any, "a finite number", &out->loss));
  XV_RETURN_IF_ERROR(ReadDouble(step, "lrm", Any, "a finite number", &out->lrm));
  XV_RETURN_IF_ERROR(ReadDouble(step, "dt_ms", NonNegative, kNonNegative, &out->dt_ms));
  XV_RETURN_IF_ERROR(ReadDouble(step, "tok_per_sec", NonNegative, kNonNegative, &out->tok_per_sec));
  XV_RETURN_IF_ERROR(ReadDouble(step, "mfu_percent", Any, "a finite number", &out->mfu_percent));
  XV_RETURN_IF_ERROR(ReadDouble(step, "progress", Fraction, "a number in [0, 1]", &out->progress));
  return Status::Ok();
}

bool ReadPlausibleStepFigures(const FlatJsonObject& step, StepFigures* out) {
  std::optional<int64_t> n;
  if (!PlausibleCount(step, "step", std::numeric_limits<int64_t>::max(), &n)) return false;
  out->step = n.value_or(0);
  return PlausibleDouble(step, "loss", Any, &out->loss) &&
         PlausibleDouble(step, "lrm", Any, &out->lrm) &&
         PlausibleDouble(step, "dt_ms", NonNegative, &out->dt_ms) &&
         PlausibleDouble(step, "tok_per_sec", NonNegative, &out->tok_per_sec) &&
         PlausibleDouble(step, "mfu_percent", Any, &out->mfu_percent) &&
         PlausibleDouble(step, "progress", Fraction, &out->progress);
}

}  // namespace xv::sched
