// AuditInterceptor: writes the audit table (daemon/store/audit_log.h). One row for every call of
// a state-changing method (MethodRules' state_changing) whatever its outcome, and one for every
// call of any method refused with UNAUTHENTICATED or PERMISSION_DENIED: who (the caller as the
// Authorizer identifies it; "anonymous" when it cannot), the method, the target the request names,
// the outcome (ok, or the status code's name and its message). Rows are written when the call's
// status is sent; a failed write is logged, never the call's failure.
// Thread-safety: one interceptor per call, used by that call only; the factory holds only
// pointers to objects that outlive the server.
#pragma once

#include <grpcpp/support/server_interceptor.h>

#include "daemon/api/authorizer.h"
#include "daemon/store/store.h"

namespace xv::daemon {

class AuditInterceptorFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  // `store` and `authorizer` must outlive the server.
  AuditInterceptorFactory(store::Store* store, const Authorizer* authorizer)
      : store_(store), authorizer_(authorizer) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  store::Store* store_;
  const Authorizer* authorizer_;
};

// The name of a gRPC status code as the audit table stores it ("PERMISSION_DENIED").
const char* StatusCodeName(grpc::StatusCode code);

}  // namespace xv::daemon
