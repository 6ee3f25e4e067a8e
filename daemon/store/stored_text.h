// How the store bounds and reads the text it keeps: the tails of stderr it stores and lists, and
// the fields of a worker-sent JSON event (numbers, integers, text) read without trusting its shape.
// Thread-safety: pure functions and constants.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/bounded_json.h"
#include "common/untrusted_text.h"
#include "daemon/sched/attempt_outcome.h"
#include "daemon/sched/result_plausibility.h"

namespace xv::store {

// The stderr tail an attempt keeps, and the part of it a list carries.
constexpr size_t kMaxStderrTail = 16 * 1024;
constexpr size_t kListStderrTail = 2 * 1024;

// The failure kind of an attempt whose trainer reported figures that cannot be true
// (daemon/sched/result_plausibility.h); the attempt ends invalid with it.
constexpr const char* kImplausibleResult = sched::kImplausibleResultKind;

// A number of a JSON object, or nullopt when missing, null or not a number.
inline std::optional<double> NumberField(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

// An integer of a JSON object, or nullopt when missing, not a number or outside int64.
inline std::optional<int64_t> IntField(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return std::nullopt;
  return sched::JsonInt64(*it);
}

// A text field of a worker-sent event: a string as is, another scalar as its JSON text (a nan
// event's value may be a number), an array or object described ("an array of 3"), never dumped.
inline std::string TextField(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_structured()) return DescribeJsonValue(*it);
  return it->dump();
}

// The last `n` bytes of `s` at most, starting on a code-point boundary: a cut never leaves half a
// character (a tail of "é" cut mid-character made every listing holding it fail to serialize).
inline std::string Tail(const std::string& s, size_t n) { return std::string(Utf8Suffix(s, n)); }

}  // namespace xv::store
