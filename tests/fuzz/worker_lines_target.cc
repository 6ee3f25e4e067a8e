// Fuzz target: the worker's handling of a trainer's output streams through their public
// interfaces: stderr into LineTail (worker/line_tail.h) in arbitrary chunks, and stdout lines into
// TrainerOutputReader (worker/trainer_output_reader.h) as the daemon will receive them.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/bounded_json.h"
#include "fuzz_driver.h"
#include "fuzz_targets.h"
#include "worker/line_tail.h"
#include "worker/trainer_output_reader.h"

namespace xv::fuzz {

int FuzzWorkerLines(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  // Byte 0: lines to keep (1..8); byte 1: bytes per line (1..256); byte 2: chunk size (1..64).
  const size_t max_lines = 1 + data[0] % 8;
  const size_t max_line_bytes = 1 + data[1] % 256;
  const size_t chunk = 1 + data[2] % 64;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 3, size - 3);

  worker::LineTail tail(max_lines, max_line_bytes);
  for (size_t at = 0; at < bytes.size(); at += chunk) tail.Append(bytes.substr(at, chunk));
  const std::string text = tail.Text();
  // Bounded whatever came in: at most max_lines lines of at most max_line_bytes each.
  XV_FUZZ_CHECK(text.size() <= max_lines * (max_line_bytes + 1),
                "a tail of " + std::to_string(text.size()) + " bytes for " +
                    std::to_string(max_lines) + " lines of " + std::to_string(max_line_bytes));
  size_t lines = 1, longest = 0, current = 0;
  for (const char c : text) {
    if (c == '\n') {
      ++lines;
      current = 0;
    } else {
      longest = std::max(longest, ++current);
    }
  }
  XV_FUZZ_CHECK(text.empty() || lines <= max_lines, std::to_string(lines) + " lines kept");
  XV_FUZZ_CHECK(longest <= max_line_bytes, "a kept line of " + std::to_string(longest) + " bytes");

  // The same bytes as stdout, one line per '\n' (whole lines, as the worker cuts them): every
  // relayed event is an object the daemon can read within the nesting limit.
  worker::TrainerOutputReader reader(worker::TrainerOutputFormat::kXvEvents);
  size_t start = 0;
  while (start < bytes.size()) {
    size_t nl = bytes.find('\n', start);
    if (nl == std::string_view::npos) nl = bytes.size();
    for (const auto& ev : reader.ReadLine(std::string(bytes.substr(start, nl - start)), 1.7e9)) {
      XV_FUZZ_CHECK(JsonNestingDepth(ev.json) <= kMaxJsonDepth,
                    "a relayed " + ev.type + " event nested deeper than the daemon reads");
      nlohmann::json j;
      XV_FUZZ_CHECK(ParseBoundedJson(ev.json, "event", &j).ok() && j.is_object(),
                    "a relayed " + ev.type + " event that is not a JSON object");
    }
    start = nl + 1;
  }
  return 0;
}

}  // namespace xv::fuzz
