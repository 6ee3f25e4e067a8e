#include "common/probe_figures.h"

#include <nlohmann/json.hpp>

#include "common/bounded_json_or_discarded.h"

namespace xv {

bool ParseProbeFigures(const std::string& probe_json, ProbeFigures* out) {
  *out = ProbeFigures();
  nlohmann::json j = ParseBoundedJsonOrDiscarded(probe_json);
  if (!j.is_object()) return false;
  auto m = j.find("matmul");
  if (m != j.end() && m->is_array()) {
    for (const auto& e : *m) {
      if (!e.is_object() || !e.contains("tflops") || !e["tflops"].is_number()) continue;
      double t = e["tflops"].get<double>();
      if (t > out->matmul_tflops) {
        out->matmul_tflops = t;
        out->matmul_dtype =
            e.contains("dtype") && e["dtype"].is_string() ? e["dtype"].get<std::string>() : "";
      }
    }
  }
  auto b = j.find("bandwidth");
  if (b != j.end() && b->is_object() && b->contains("gb_per_s") && (*b)["gb_per_s"].is_number()) {
    out->bandwidth_gb_per_s = (*b)["gb_per_s"].get<double>();
  }
  return true;
}

}  // namespace xv
