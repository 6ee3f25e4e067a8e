#include "client/views/device_health_view.h"

#include <cmath>

#include "client/views/number_format.h"
#include "client/views/text_table.h"

namespace xv::client {
namespace {

using nlohmann::json;

json OptionalNumber(bool has, double v) {
  return has && std::isfinite(v) ? json(v) : json(nullptr);
}

}  // namespace

std::optional<double> TokensPerJoule(const v1::Result& r) {
  if (!r.has_health() || !r.health().has_energy_j() || r.health().energy_j() <= 0 ||
      r.total_tokens() <= 0) {
    return std::nullopt;
  }
  return static_cast<double>(r.total_tokens()) / r.health().energy_j();
}

std::optional<double> MeasuredMfuPercent(const v1::Result& r) {
  const double measured = r.measured_peak_flops();
  if (!(measured > 0)) return std::nullopt;
  if (r.mfu_percent() >= 0 && r.peak_flops() > 0) {
    return r.mfu_percent() * r.peak_flops() / measured;
  }
  if (r.flops_per_token() > 0 && r.tok_per_sec() > 0) {
    return 100.0 * static_cast<double>(r.flops_per_token()) * r.tok_per_sec() / measured;
  }
  return std::nullopt;
}

void AddHealthJson(const v1::Result* r, json* j) {
  const char* keys[] = {"health_source",
                        "health_samples",
                        "avg_power_w",
                        "energy_j",
                        "tokens_per_joule",
                        "peak_temp_c",
                        "throttle_events",
                        "throttled_seconds",
                        "throttled",
                        "throttle_reasons",
                        "energy_method",
                        "measured_peak_flops",
                        "mfu_measured_percent",
                        "start_temp_c",
                        "thermal_wait_s"};
  for (const char* k : keys) (*j)[k] = nullptr;
  if (r == nullptr) return;
  if (r->measured_peak_flops() > 0) (*j)["measured_peak_flops"] = r->measured_peak_flops();
  if (auto m = MeasuredMfuPercent(*r)) (*j)["mfu_measured_percent"] = *m;
  if (!r->has_health()) return;
  const v1::DeviceHealth& h = r->health();
  (*j)["health_source"] = h.source();
  (*j)["health_samples"] = h.sample_count();
  (*j)["avg_power_w"] = OptionalNumber(h.has_avg_power_w(), h.avg_power_w());
  (*j)["energy_j"] = OptionalNumber(h.has_energy_j(), h.energy_j());
  if (auto t = TokensPerJoule(*r)) (*j)["tokens_per_joule"] = *t;
  (*j)["peak_temp_c"] = OptionalNumber(h.has_peak_temp_c(), h.peak_temp_c());
  if (!h.energy_method().empty()) (*j)["energy_method"] = h.energy_method();
  (*j)["start_temp_c"] = OptionalNumber(h.has_start_temp_c(), h.start_temp_c());
  (*j)["thermal_wait_s"] = h.start_wait_s();
  if (h.throttle_known()) {
    (*j)["throttle_events"] = h.throttle_events();
    (*j)["throttled_seconds"] = h.throttled_seconds();
    (*j)["throttled"] = h.throttled();
    (*j)["throttle_reasons"] = h.throttle_reasons();
  }
}

std::string EnergyCell(const v1::Result& r) {
  if (!r.has_health()) return "-";
  const v1::DeviceHealth& h = r.health();
  std::string cell = "-";
  if (h.has_energy_j()) {
    const double e = h.energy_j();
    cell = e >= 10000 ? FormatFixed(e / 1000, 1) + " kJ" : FormatFixed(e, 0) + " J";
  }
  if (h.throttled()) cell += " throttled";
  return cell;
}

std::string TokensPerJouleCell(const v1::Result& r) {
  auto t = TokensPerJoule(r);
  if (!t) return "-";
  return *t >= 100 ? FormatThousands(*t) : FormatFixed(*t, 2);
}

json WorkerProbeJson(const v1::WorkerInfo& w) {
  return {
      {"matmul_tflops", OptionalNumber(w.probe_matmul_tflops() > 0, w.probe_matmul_tflops())},
      {"bandwidth_gb_per_s", OptionalNumber(w.probe_bandwidth_gbs() > 0, w.probe_bandwidth_gbs())},
      {"datasheet_peak_tflops",
       OptionalNumber(w.device().peak_flops() > 0, w.device().peak_flops() / 1e12)}};
}

std::string RenderWorkersTable(const std::vector<v1::WorkerInfo>& workers) {
  using A = TextTable::Align;
  TextTable t({{"worker", A::kLeft},
               {"state", A::kLeft},
               {"device", A::kLeft},
               {"backend", A::kLeft},
               {"matmul TFLOP/s", A::kRight},
               {"bandwidth GB/s", A::kRight},
               {"peak TFLOP/s", A::kRight},
               {"experiment", A::kRight},
               {"last heartbeat", A::kLeft}});
  for (const auto& w : workers) {
    t.AddRow({w.name(), w.state(), w.device().name(),
              w.device().backend().empty() ? "-" : w.device().backend(),
              w.probe_matmul_tflops() > 0 ? FormatFixed(w.probe_matmul_tflops(), 2) : "-",
              w.probe_bandwidth_gbs() > 0 ? FormatFixed(w.probe_bandwidth_gbs(), 1) : "-",
              w.device().peak_flops() > 0 ? FormatFixed(w.device().peak_flops() / 1e12, 0) : "-",
              w.current_experiment_id() ? std::to_string(w.current_experiment_id()) : "-",
              w.last_heartbeat().empty() ? "-" : w.last_heartbeat()});
  }
  return t.Render();
}

}  // namespace xv::client
