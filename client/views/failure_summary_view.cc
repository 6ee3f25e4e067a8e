#include "client/views/failure_summary_view.h"

#include "client/views/number_format.h"
#include "client/views/text_table.h"

namespace xv::client {

std::string RenderFailureSummary(const std::vector<v1::KnobFailure>& knobs) {
  using A = TextTable::Align;
  TextTable t({{"knob", A::kLeft},
               {"value", A::kLeft},
               {"runs", A::kRight},
               {"diverged", A::kRight},
               {"crashed", A::kRight},
               {"timed_out", A::kRight},
               {"NaN rate", A::kRight}});
  for (const auto& k : knobs) {
    t.AddRow({k.knob(), k.value(), std::to_string(k.runs()), std::to_string(k.diverged()),
              std::to_string(k.crashed()), std::to_string(k.timed_out()),
              FormatFixed(100.0 * k.nan_rate(), 1) + "%"});
  }
  return t.Render();
}

nlohmann::json FailureSummaryJson(const std::vector<v1::KnobFailure>& knobs) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& k : knobs) {
    arr.push_back({{"knob", k.knob()},
                   {"value", k.value()},
                   {"runs", k.runs()},
                   {"diverged", k.diverged()},
                   {"crashed", k.crashed()},
                   {"timed_out", k.timed_out()},
                   {"nan_runs", k.nan_runs()},
                   {"nan_rate", k.nan_rate()}});
  }
  return nlohmann::json{{"failures", arr}};
}

}  // namespace xv::client
