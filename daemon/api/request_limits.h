// RequestLimits: the one table of what every string field of the client API (the request messages
// of xv.v1.Experiments, Campaigns and Plans in proto/xv/v1/experiments.proto) may hold, and the
// check the services run on each request before anything else: before a recipe is parsed, before
// anything is stored, before anything is logged. docs/agent.md § Limits of the API prints the same
// table; a unit test keeps every string field of every request covered and the docs in sync.
//
// Each row gives a field's path in proto names (repeated fields as "[]"), its limit in bytes of
// UTF-8, whether it is a name (no C0/C1 control characters: names are printed in listings and on
// terminals), and, for enum-like fields, the words it accepts. The error of a refused request is
// INVALID_ARGUMENT and starts with the field's path, indexes 0-based as in the message:
//   candidates[3].name: 1048576 bytes, over the limit of 200 (shorten it)
//   candidates[0].overrides[2].key: holds a control character ("a\x1bb"); names are ...
//   state: "pwned" is not one of queued, assigned, ... (or empty)
// and quotes at most ~200 bytes of the input (common/untrusted_text.h QuoteExcerpt).
// Thread-safety: the table is immutable; the functions are pure.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <google/protobuf/message.h>

#include "common/status.h"
#include "common/untrusted_text.h"

namespace xv::daemon {

// Limits of the larger texts, in bytes (names, kinds and details: common/untrusted_text.h).
inline constexpr size_t kMaxRecipeTextBytes = 64 * 1024;  // a recipe file's YAML text
inline constexpr size_t kMaxPolicyTextBytes = 64 * 1024;  // an acceptance policy, YAML or JSON
inline constexpr size_t kMaxBudgetJsonBytes = 16 * 1024;  // a budget contract (JSON object)
inline constexpr size_t kMaxPlanYamlBytes = 256 * 1024;   // a plan file's YAML text
inline constexpr size_t kMaxOverrideValueBytes = 1024;    // one override's YAML scalar text
// A list reply stops before this many bytes (ListExperimentsResponse.truncated says so): a page of
// 10,000 rows with their results and stderr tails would not fit a gRPC message.
inline constexpr size_t kMaxListReplyBytes = 4 * 1024 * 1024;

// One string field of one request message.
struct RequestFieldLimit {
  const char* request;  // the message's name in package xv.v1: "SubmitRequest"
  const char* field;    // path in proto names, repeated fields as "[]": "candidates[].name"
  size_t max_bytes;     // in bytes of UTF-8
  bool is_name;         // control characters are refused
  // Enum-like fields: every accepted word ("" included where the field may be left empty);
  // empty for free text.
  std::vector<std::string> allowed;
};

// Every string field of every request of the client API, by message in proto order.
const std::vector<RequestFieldLimit>& RequestFieldLimits();

// The row of `request` (a message name such as "SubmitRequest") and `field` (a path with "[]"),
// or nullptr when the table has none.
const RequestFieldLimit* FindRequestFieldLimit(const std::string& request,
                                               const std::string& field);

// Checks every string field of `request` (walking nested and repeated messages) against its row:
// valid UTF-8, at most max_bytes, no control characters in names, one of the allowed words. The
// first offending field, in proto field order, is named in the INVALID_ARGUMENT error. A string
// field the table does not know (a field added to the proto without a row) is held to
// kMaxDetailBytes.
Status CheckRequestLimits(const google::protobuf::Message& request);

}  // namespace xv::daemon
