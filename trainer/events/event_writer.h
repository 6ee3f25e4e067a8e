// EventWriter: xv-train's stdout event stream (docs/events.md). Each Emit writes one JSON object on
// one line, with "type" and "t" (unix seconds, float) added, and flushes, so the worker sees events
// as they happen. Non-finite numbers are written as null (JSON has no NaN). Thread-safety: Emit may
// be called from any thread; lines never interleave (guarded by mu_).
#pragma once

#include <cstdio>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

namespace xv::trainer {

class EventWriter {
 public:
  // `out` is not owned and must outlive the writer (stdout in xv-train, a temp file in tests).
  explicit EventWriter(std::FILE* out) : out_(out) {}

  // Writes {"type": type, "t": now, ...fields}. `fields` must be a JSON object (or null).
  void Emit(const std::string& type, const nlohmann::json& fields);

  // Number of events written so far.
  int64_t count() const;

 private:
  mutable std::mutex mu_;
  std::FILE* out_;     // guarded by mu_
  int64_t count_ = 0;  // guarded by mu_
};

// Unix time in seconds with sub-second precision.
double UnixSecondsNow();

// A finite double as a JSON number, a non-finite one as null.
nlohmann::json FiniteOrNull(double v);

}  // namespace xv::trainer
