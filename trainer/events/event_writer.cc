#include "trainer/events/event_writer.h"

#include <chrono>
#include <cmath>

namespace xv::trainer {

double UnixSecondsNow() {
  using namespace std::chrono;
  return duration_cast<duration<double>>(system_clock::now().time_since_epoch()).count();
}

nlohmann::json FiniteOrNull(double v) {
  if (std::isfinite(v)) return v;
  return nullptr;
}

void EventWriter::Emit(const std::string& type, const nlohmann::json& fields) {
  nlohmann::json line = nlohmann::json::object();
  line["type"] = type;
  line["t"] = UnixSecondsNow();
  if (fields.is_object()) {
    for (auto it = fields.begin(); it != fields.end(); ++it) {
      if (it.key() == "type" || it.key() == "t") continue;
      line[it.key()] = it.value();
    }
  }
  // Invalid UTF-8 (e.g. in an error message quoting a file) is replaced, never thrown on.
  std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::lock_guard<std::mutex> lock(mu_);
  std::fputs(text.c_str(), out_);
  std::fputc('\n', out_);
  std::fflush(out_);
  ++count_;
}

int64_t EventWriter::count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return count_;
}

}  // namespace xv::trainer
