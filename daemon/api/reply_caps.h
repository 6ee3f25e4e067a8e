// ReplyCaps: no unary reply of the client API grows past kMaxListReplyBytes (request_limits.h), so
// none exceeds a client's 4 MiB receive limit however large the database grows (issue 18).
// ListExperiments pages (limit, after_id) and says `truncated`; the replies whose messages have
// no paging fields (ListCampaigns, ListPlans, FailureSummary, ListAudit, GetCampaign's rounds and
// head history) are trimmed by TrimRowsToReplyCap, and the call's trailing metadata
// `xv-rows-omitted` says how many rows were left out (NoteRowsOmitted; absent when none).
// Thread-safety: pure functions of their arguments.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/message.h>
#include <google/protobuf/repeated_ptr_field.h>
#include <grpcpp/grpcpp.h>

#include "daemon/api/request_limits.h"

namespace xv::daemon {

// GetCampaign's request metadata key: which rounds the reply holds, for a caller that needs a few
// of them (the reply message has no such field; a campaign of 100k experiments has thousands of
// rounds). "none": the campaign alone, no rounds and no head history (the budget, the head
// recipe); "ids:7,9,12": only these rounds (at most kMaxCampaignRoundIds), no head history.
// Absent: every round and the head history, trimmed to the cap. Anything else: INVALID_ARGUMENT.
inline constexpr char kCampaignRoundsMetadata[] = "xv-campaign-rounds";
inline constexpr int kMaxCampaignRoundIds = 1000;

// ListExperiments' request metadata key: with any value, the reply's trailing metadata
// kRowsMatchingMetadata says how many experiments match the request's filters past its cursor
// (ExperimentQueries::CountExperiments): this page's rows and every later page's, counted in SQL.
inline constexpr char kCountMatchingMetadata[] = "xv-count-matching";
inline constexpr char kRowsMatchingMetadata[] = "xv-rows-matching";

// The trailing metadata key of a trimmed reply: the rows left out, in decimal.
inline constexpr char kRowsOmittedMetadata[] = "xv-rows-omitted";

// Which rows a trimmed reply keeps: the first ones (lists in their order) or the last ones (a
// campaign's newest rounds, which are listed oldest first).
enum class KeepRows { kFirst, kLast };

// Removes rows of `rows` (a repeated field of `reply`) from the other end than `keep` until
// `reply` serialises to at most `cap` bytes or one row is left. Returns the rows removed.
template <typename Row>
int64_t TrimRowsToReplyCap(const google::protobuf::Message& reply,
                           google::protobuf::RepeatedPtrField<Row>* rows, KeepRows keep,
                           size_t cap = kMaxListReplyBytes) {
  size_t bytes = reply.ByteSizeLong();
  int n = rows->size();
  while (bytes > cap && n > 1) {
    const Row& dropped = keep == KeepRows::kFirst ? rows->Get(n - 1) : rows->Get(rows->size() - n);
    // The row, its length prefix and its tag (at least one byte: never more than the reply loses,
    // so the reply left is at most `bytes`).
    const size_t size = dropped.ByteSizeLong();
    const size_t row_bytes = size + google::protobuf::io::CodedOutputStream::VarintSize64(size) + 1;
    bytes = bytes > row_bytes ? bytes - row_bytes : 0;
    --n;
  }
  const int removed = rows->size() - n;
  if (removed > 0) {
    rows->DeleteSubrange(keep == KeepRows::kFirst ? n : 0, removed);
  }
  return removed;
}

// Sets the call's `xv-rows-omitted` trailing metadata when `omitted` > 0.
inline void NoteRowsOmitted(grpc::ServerContext* ctx, int64_t omitted) {
  if (omitted > 0 && ctx != nullptr) {
    ctx->AddTrailingMetadata(kRowsOmittedMetadata, std::to_string(omitted));
  }
}

}  // namespace xv::daemon
