// TokensService and AuditService: the xv.v1.Tokens and xv.v1.Audit gRPC services (admin only,
// proto/xv/v1/auth.proto): create, list and revoke bearer tokens (through the Authorizer, which
// keeps its cache in step), and read the audit table.
// Thread-safety: gRPC calls the methods concurrently; state lives in the store and the Authorizer.
#pragma once

#include "daemon/api/authorizer.h"
#include "daemon/store/store.h"
#include "xv/v1/auth.grpc.pb.h"

namespace xv::daemon {

class TokensService final : public xv::v1::Tokens::Service {
 public:
  // `authorizer` must outlive the service.
  explicit TokensService(Authorizer* authorizer) : authorizer_(authorizer) {}

  // INVALID_ARGUMENT for an unknown role, or a worker name on a non-worker token; ALREADY_EXISTS
  // when another valid token owns the worker name.
  grpc::Status CreateToken(grpc::ServerContext* ctx, const xv::v1::CreateTokenRequest* req,
                           xv::v1::CreateTokenResponse* resp) override;
  grpc::Status ListTokens(grpc::ServerContext* ctx, const xv::v1::ListTokensRequest* req,
                          xv::v1::ListTokensResponse* resp) override;
  // NOT_FOUND for an unknown id.
  grpc::Status RevokeToken(grpc::ServerContext* ctx, const xv::v1::RevokeTokenRequest* req,
                           xv::v1::Token* resp) override;

 private:
  Authorizer* authorizer_;
};

class AuditService final : public xv::v1::Audit::Service {
 public:
  // `store` and `authorizer` must outlive the service.
  AuditService(store::Store* store, const Authorizer* authorizer)
      : store_(store), authorizer_(authorizer) {}

  // The newest records (limit 0 = 50; INVALID_ARGUMENT outside 0..10000).
  grpc::Status ListAudit(grpc::ServerContext* ctx, const xv::v1::ListAuditRequest* req,
                         xv::v1::ListAuditResponse* resp) override;

 private:
  store::Store* store_;
  const Authorizer* authorizer_;
};

}  // namespace xv::daemon
