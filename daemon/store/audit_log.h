// AuditLog: the audit table (migrations/0009_tokens_audit.sql): one row per state-changing call
// and per refused call, written by daemon/api/audit_interceptor.h, read by `xvctl audit`.
// Threading contract: as Database; every method holds its mutex for one statement.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "daemon/store/database.h"

namespace xv::store {

struct AuditRow {
  int64_t id = 0;
  std::string at;        // UTC, set by the store
  int64_t token_id = 0;  // 0 when the caller sent no (known) token
  std::string caller;    // "token:ID", "uid:N", "local" or "anonymous"
  std::string peer;      // gRPC's peer address
  std::string method;    // "/xv.v1.Experiments/Submit"
  std::string target;    // what the request names ("experiment 12", "campaign lr")
  std::string outcome;   // "ok", or the status code name ("PERMISSION_DENIED", ...)
  std::string detail;    // the refusal's message ("" for ok)
};

class AuditLog {
 public:
  explicit AuditLog(Database* db) : db_(db) {}

  // Appends one row (id and at are the store's).
  Status Append(const AuditRow& row);
  // The newest `limit` rows, newest first.
  Status ListRecent(int limit, std::vector<AuditRow>* out);

 private:
  Database* db_;
};

}  // namespace xv::store
