#include "daemon/api/authorizer.h"

#include <spdlog/spdlog.h>

#include "common/bearer_token.h"
#include "daemon/api/method_roles.h"

namespace xv::daemon {
namespace {

constexpr const char* kNoToken =
    "no token: send `authorization: Bearer TOKEN` (xvctl and xv-worker: --token-file FILE, or "
    "XV_TOKEN_FILE / XV_TOKEN; an admin makes one with `xvctl token create`)";

// The bearer token of the call: *present is false without an authorization header; UNAUTHENTICATED
// for a header that is not "Bearer TOKEN".
grpc::Status BearerToken(const grpc::ServerContextBase& ctx, bool* present, std::string* token) {
  *present = false;
  const auto& md = ctx.client_metadata();
  auto it = md.find("authorization");
  if (it == md.end()) return grpc::Status::OK;
  *present = true;
  const std::string value(it->second.data(), it->second.size());
  const std::string scheme = "Bearer ";
  if (value.size() <= scheme.size() || value.compare(0, scheme.size(), scheme) != 0) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "authorization: expected `Bearer TOKEN`");
  }
  *token = value.substr(scheme.size());
  return grpc::Status::OK;
}

}  // namespace

void UnixPeerRegistry::Record(int fd, uid_t uid) {
  MutexLock lock(&mu_);
  uid_by_fd_[fd] = uid;
}

bool UnixPeerRegistry::Lookup(const std::string& peer, uid_t* uid) const {
  if (peer.rfind("fd:", 0) != 0) return false;
  int fd = -1;
  try {
    fd = std::stoi(peer.substr(3));
  } catch (...) {
    return false;
  }
  MutexLock lock(&mu_);
  auto it = uid_by_fd_.find(fd);
  if (it == uid_by_fd_.end()) return false;
  *uid = it->second;
  return true;
}

std::string Caller::Label() const {
  switch (kind) {
    case Kind::kOpen:
      return "local";
    case Kind::kLocalUser:
      return "uid:" + std::to_string(uid);
    case Kind::kToken:
      return "token:" + std::to_string(token_id);
  }
  return "";
}

Authorizer::Authorizer(store::Store* store, const UnixPeerRegistry* peers,
                       AuthorizerOptions options)
    : store_(store), peers_(peers), options_(options) {}

Status Authorizer::Load() {
  std::vector<store::TokenRow> rows;
  XV_RETURN_IF_ERROR(store_->tokens().ListTokens(&rows));
  MutexLock lock(&mu_);
  tokens_by_hash_.clear();
  for (store::TokenRow& row : rows) tokens_by_hash_[row.hash] = std::move(row);
  any_token_ = !tokens_by_hash_.empty();
  return Status::Ok();
}

bool Authorizer::enforcing() const { return options_.require_tokens || any_token_.load(); }

grpc::Status Authorizer::Identify(const grpc::ServerContextBase& ctx, Caller* out) const {
  *out = Caller{};
  bool present = false;
  std::string token;
  if (grpc::Status s = BearerToken(ctx, &present, &token); !s.ok()) return s;
  if (present) {
    MutexLock lock(&mu_);
    auto it = tokens_by_hash_.find(HashBearerToken(token));
    if (it == tokens_by_hash_.end()) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "authorization: unknown token");
    }
    if (!it->second.revoked_at.empty()) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "authorization: token " + std::to_string(it->second.id) +
                              " was revoked at " + it->second.revoked_at);
    }
    out->kind = Caller::Kind::kToken;
    out->token_id = it->second.id;
    out->role = it->second.role;
    out->worker_name = it->second.worker_name;
    return grpc::Status::OK;
  }
  if (!enforcing()) return grpc::Status::OK;  // kOpen
  uid_t uid = 0;
  if (peers_ != nullptr && peers_->Lookup(ctx.peer(), &uid) &&
      (uid == options_.owner_uid || uid == 0)) {
    out->kind = Caller::Kind::kLocalUser;
    out->uid = uid;
    return grpc::Status::OK;
  }
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, kNoToken);
}

grpc::Status Authorizer::Authorize(const grpc::ServerContextBase& ctx, const char* method,
                                   Caller* out) const {
  const MethodRule* rule = FindMethodRule(method);
  if (rule == nullptr) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        std::string(method) + ": not in xvd's table of method roles");
  }
  if (grpc::Status s = Identify(ctx, out); !s.ok()) return s;
  if (out->kind != Caller::Kind::kToken || RoleAllows(out->role, rule->required)) {
    return grpc::Status::OK;
  }
  const std::string needed(ToString(rule->required));
  std::string why = std::string(method) + " needs the " + needed + " role; token " +
                    std::to_string(out->token_id) + " has the " + std::string(ToString(out->role)) +
                    " role";
  if (rule->required == TokenRole::kWorker) {
    why += " (only a worker token opens a worker session)";
  } else if (out->role == TokenRole::kWorker) {
    why += " (a worker token opens the worker session only)";
  }
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, why);
}

Status Authorizer::CreateToken(const Caller& by, TokenRole role, const std::string& name,
                               const std::string& worker_name, store::TokenRow* row,
                               std::string* secret) {
  if (!worker_name.empty() && role != TokenRole::kWorker) {
    return Status::InvalidArgument("--worker: only a token of role worker is bound to a worker");
  }
  XV_RETURN_IF_ERROR(GenerateBearerToken(secret));
  store::TokenRow t;
  t.name = name;
  t.role = role;
  t.worker_name = worker_name;
  t.hash = HashBearerToken(*secret);
  t.created_by = by.Label();
  int64_t id = 0;
  XV_RETURN_IF_ERROR(store_->tokens().CreateToken(t, &id));
  XV_RETURN_IF_ERROR(Load());
  MutexLock lock(&mu_);
  *row = tokens_by_hash_[t.hash];
  return Status::Ok();
}

Status Authorizer::RevokeToken(int64_t id, store::TokenRow* row) {
  XV_RETURN_IF_ERROR(store_->tokens().RevokeToken(id, row));
  return Load();
}

grpc::Status Authorizer::CheckWorkerName(const Caller& caller,
                                         const std::string& worker_name) const {
  if (caller.kind != Caller::Kind::kToken) return grpc::Status::OK;
  if (!caller.worker_name.empty() && caller.worker_name != worker_name) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        "register: token " + std::to_string(caller.token_id) +
                            " is bound to worker " + caller.worker_name + ", not " + worker_name);
  }
  store::WorkerNameClaim claim;
  Status s = store_->tokens().ClaimWorkerName(caller.token_id, worker_name, &claim);
  if (!s.ok()) return grpc::Status(grpc::StatusCode::UNAVAILABLE, s.ToString());
  if (!claim.granted) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        "register: worker name " + worker_name + " belongs to token " +
                            std::to_string(claim.owner_id) + ", not token " +
                            std::to_string(caller.token_id) +
                            " (a worker takes over its session only with its own credential)");
  }
  return grpc::Status::OK;
}

grpc::Status AuthorizeCall(const Authorizer* authorizer, const grpc::ServerContextBase& ctx,
                           const char* method, Caller* caller) {
  Caller unused;
  if (caller == nullptr) caller = &unused;
  if (authorizer == nullptr) return grpc::Status::OK;
  grpc::Status s = authorizer->Authorize(ctx, method, caller);
  if (!s.ok()) spdlog::info("{} refused ({}): {}", method, ctx.peer(), s.error_message());
  return s;
}

}  // namespace xv::daemon
