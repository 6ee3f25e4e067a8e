#include "daemon/api/tokens_service.h"

#include <spdlog/spdlog.h>

#include "daemon/api/grpc_status.h"
#include "daemon/api/reply_caps.h"

namespace xv::daemon {
namespace {

constexpr int kDefaultAuditLimit = 50;
constexpr int kMaxAuditLimit = 10000;
constexpr size_t kMaxTokenNameBytes = 200;

void FillToken(const store::TokenRow& row, xv::v1::Token* out) {
  out->set_id(row.id);
  out->set_name(row.name);
  out->set_role(std::string(ToString(row.role)));
  out->set_worker_name(row.worker_name);
  out->set_created_by(row.created_by);
  out->set_created_at(row.created_at);
  out->set_revoked_at(row.revoked_at);
}

}  // namespace

grpc::Status TokensService::CreateToken(grpc::ServerContext* ctx,
                                        const xv::v1::CreateTokenRequest* req,
                                        xv::v1::CreateTokenResponse* resp) {
  Caller caller;
  if (grpc::Status a = AuthorizeCall(authorizer_, *ctx, "/xv.v1.Tokens/CreateToken", &caller);
      !a.ok()) {
    return a;
  }
  TokenRole role;
  if (!ParseTokenRole(req->role(), &role)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "--role " + req->role() + ": expected read, submit, admin or worker");
  }
  if (req->name().size() > kMaxTokenNameBytes || req->worker_name().size() > kMaxTokenNameBytes) {
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        "--name/--worker: at most " + std::to_string(kMaxTokenNameBytes) + " bytes");
  }
  store::TokenRow row;
  std::string secret;
  xv::Status s =
      authorizer_->CreateToken(caller, role, req->name(), req->worker_name(), &row, &secret);
  if (!s.ok()) return ToGrpcStatus(s);
  spdlog::info("token {} ({}, role {}) created by {}", row.id, row.name, ToString(row.role),
               caller.Label());
  FillToken(row, resp->mutable_token());
  resp->set_secret(secret);
  return grpc::Status::OK;
}

grpc::Status TokensService::ListTokens(grpc::ServerContext* ctx, const xv::v1::ListTokensRequest*,
                                       xv::v1::ListTokensResponse* resp) {
  if (grpc::Status a = AuthorizeCall(authorizer_, *ctx, "/xv.v1.Tokens/ListTokens"); !a.ok()) {
    return a;
  }
  std::vector<store::TokenRow> rows;
  // The Authorizer's store is the daemon's; the list comes from it, not the cache.
  xv::Status s = authorizer_->ListTokens(&rows);
  if (!s.ok()) return ToGrpcStatus(s);
  for (const store::TokenRow& row : rows) FillToken(row, resp->add_tokens());
  return grpc::Status::OK;
}

grpc::Status TokensService::RevokeToken(grpc::ServerContext* ctx,
                                        const xv::v1::RevokeTokenRequest* req,
                                        xv::v1::Token* resp) {
  Caller caller;
  if (grpc::Status a = AuthorizeCall(authorizer_, *ctx, "/xv.v1.Tokens/RevokeToken", &caller);
      !a.ok()) {
    return a;
  }
  store::TokenRow row;
  xv::Status s = authorizer_->RevokeToken(req->id(), &row);
  if (!s.ok()) return ToGrpcStatus(s);
  spdlog::info("token {} revoked by {}", row.id, caller.Label());
  FillToken(row, resp);
  return grpc::Status::OK;
}

grpc::Status AuditService::ListAudit(grpc::ServerContext* ctx, const xv::v1::ListAuditRequest* req,
                                     xv::v1::ListAuditResponse* resp) {
  if (grpc::Status a = AuthorizeCall(authorizer_, *ctx, "/xv.v1.Audit/ListAudit"); !a.ok()) {
    return a;
  }
  if (req->limit() < 0 || req->limit() > kMaxAuditLimit) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "--limit " + std::to_string(req->limit()) + ": expected 1.." +
                            std::to_string(kMaxAuditLimit));
  }
  std::vector<store::AuditRow> rows;
  xv::Status s =
      store_->audit().ListRecent(req->limit() == 0 ? kDefaultAuditLimit : req->limit(), &rows);
  if (!s.ok()) return ToGrpcStatus(s);
  for (const store::AuditRow& r : rows) {
    xv::v1::AuditRecord* out = resp->add_records();
    out->set_id(r.id);
    out->set_at(r.at);
    out->set_token_id(r.token_id);
    out->set_caller(r.caller);
    out->set_peer(r.peer);
    out->set_method(r.method);
    out->set_target(r.target);
    out->set_outcome(r.outcome);
    out->set_detail(r.detail);
  }
  NoteRowsOmitted(ctx, TrimRowsToReplyCap(*resp, resp->mutable_records(), KeepRows::kFirst));
  return grpc::Status::OK;
}

}  // namespace xv::daemon
