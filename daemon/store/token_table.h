// TokenTable: the tokens and worker_credentials tables (migrations/0009_tokens_audit.sql): bearer
// tokens stored as their SHA-256, and which worker token owns which worker name. The policy (who
// may do what) lives in daemon/api/authorizer.h; this is storage.
// Threading contract: as Database; every method holds its mutex for one statement or transaction.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/token_role.h"
#include "daemon/store/database.h"

namespace xv::store {

struct TokenRow {
  int64_t id = 0;
  std::string name;
  TokenRole role = TokenRole::kRead;
  std::string worker_name;  // bound at creation; "" = claims names as it registers
  std::string hash;         // hex SHA-256 of the token
  std::string created_by;
  std::string created_at;
  std::string revoked_at;  // "" while the token is valid
};

// What ClaimWorkerName found.
struct WorkerNameClaim {
  bool granted = false;  // the name is (now) this token's
  int64_t owner_id = 0;  // the token that owns the name when it is not granted
};

class TokenTable {
 public:
  explicit TokenTable(Database* db) : db_(db) {}

  // Stores a token (its hash). With a worker_name, the name is claimed for it in the same
  // transaction: AlreadyExists naming the owner when a valid token already owns that name.
  Status CreateToken(const TokenRow& token, int64_t* id);
  // Every token ever made, revoked ones too, oldest first.
  Status ListTokens(std::vector<TokenRow>* out);
  // Marks the token revoked and frees the worker names it owns. NotFound for an unknown id;
  // revoking a revoked token changes nothing.
  Status RevokeToken(int64_t id, TokenRow* revoked);
  // How many tokens were ever made (revoked ones count: revoking the last token does not turn
  // authentication off).
  Status CountTokens(int64_t* count);
  // Gives `worker_name` to `token_id` when no token owns it yet; granted as well when this token
  // already owns it; else not granted with the owner's id.
  Status ClaimWorkerName(int64_t token_id, const std::string& worker_name, WorkerNameClaim* out);

 private:
  Database* db_;
};

}  // namespace xv::store
