// Fuzz targets: the worker's reading of trainer stdout (worker/trainer_output_reader.h,
// worker/upstream_output_parser.h).
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz_driver.h"
#include "fuzz_targets.h"
#include "worker/trainer_output_reader.h"
#include "worker/upstream_output_parser.h"

namespace xv::fuzz {

namespace {

using nlohmann::json;

std::vector<std::string> SplitLines(std::string_view text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) {
      if (start < text.size()) lines.emplace_back(text.substr(start));
      break;
    }
    lines.emplace_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

// Integer fields the parsers compute from numbers: present -> an integer (or null), and never
// the value a float-to-integer conversion of nan/inf/out-of-range text produces on x86.
void CheckIntegerField(const json& ev, const char* field) {
  if (!ev.contains(field) || ev[field].is_null()) return;
  XV_FUZZ_CHECK(ev[field].is_number_integer(),
                std::string(field) + " is not an integer in " + ev.dump());
  XV_FUZZ_CHECK(ev[field].get<int64_t>() != std::numeric_limits<int64_t>::min(),
                std::string(field) + " came from a number with no integer value: " + ev.dump());
}

void CheckUpstreamEvent(const json& ev) {
  XV_FUZZ_CHECK(ev.is_object() && ev.contains("type") && ev["type"].is_string(),
                "an event without a string type: " + ev.dump());
  const std::string type = ev["type"].get<std::string>();
  if (type == "step" || type == "nan") {
    XV_FUZZ_CHECK(
        ev.contains("step") && ev["step"].is_number_integer() && ev["step"].get<int64_t>() >= 0,
        "a step/nan event without a step number >= 0: " + ev.dump());
  }
  CheckIntegerField(ev, "epoch");
  CheckIntegerField(ev, "num_steps");
  CheckIntegerField(ev, "depth");
  // What the worker sends must serialize (invalid UTF-8 from the trainer is replaced).
  (void)ev.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

int FuzzTrainerOutput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const worker::TrainerOutputFormat format =
      data[0] % 3 == 0   ? worker::TrainerOutputFormat::kXvEvents
      : data[0] % 3 == 1 ? worker::TrainerOutputFormat::kUpstream
                         : worker::TrainerOutputFormat::kAuto;
  worker::TrainerOutputReader reader(format, /*min_step_interval_s=*/0.5);
  double now = 1.7e9;
  std::vector<worker::TrainerOutputEvent> events;
  for (const std::string& line :
       SplitLines(std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1))) {
    for (auto& ev : reader.ReadLine(line, now)) events.push_back(std::move(ev));
    now += 0.1;
  }
  for (auto& ev : reader.Finish(now)) events.push_back(std::move(ev));
  for (const auto& ev : events) {
    const json j = json::parse(ev.json, nullptr, /*allow_exceptions=*/false);
    XV_FUZZ_CHECK(j.is_object(), "a relayed event is not a JSON object: " + ev.json);
    XV_FUZZ_CHECK(j.contains("type") && j["type"].is_string() && j["type"] == ev.type,
                  "a relayed event's type is not " + ev.type + ": " + ev.json);
    // The content of upstream-parsed events is FuzzUpstreamOutput's to check: here a trainer's
    // verbatim JSON line may claim anything (the daemon validates what it stores).
  }
  if (reader.diverged()) {
    XV_FUZZ_CHECK(!reader.divergence_detail().empty(), "diverged without saying why");
  }
  return 0;
}

int FuzzUpstreamOutput(const uint8_t* data, size_t size) {
  worker::UpstreamOutputParser parser(/*min_step_interval_s=*/0.5);
  double now = 1.7e9;
  std::vector<json> events;
  for (const std::string& line :
       SplitLines(std::string_view(reinterpret_cast<const char*>(data), size))) {
    for (auto& ev : parser.ParseLine(line, now)) events.push_back(std::move(ev));
    now += 0.1;
  }
  for (auto& ev : parser.Finish(now)) events.push_back(std::move(ev));
  for (const json& ev : events) {
    CheckUpstreamEvent(ev);
    if (ev["type"] == "step") {
      XV_FUZZ_CHECK(!ev.contains("loss") ||
                        (ev["loss"].is_number() && std::isfinite(ev["loss"].get<double>())),
                    "a step event with a non-finite loss (that is a nan event): " + ev.dump());
    }
  }
  XV_FUZZ_CHECK(parser.malformed_lines() >= 0 && parser.malformed_examples().size() <=
                                                     static_cast<size_t>(parser.malformed_lines()),
                "more malformed examples than malformed lines");
  if (parser.diverged()) {
    XV_FUZZ_CHECK(!parser.divergence_detail().empty(), "diverged without saying why");
  }
  return 0;
}

}  // namespace xv::fuzz
