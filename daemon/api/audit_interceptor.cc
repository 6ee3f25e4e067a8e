#include "daemon/api/audit_interceptor.h"

#include <spdlog/spdlog.h>

#include "common/untrusted_text.h"
#include "daemon/api/method_roles.h"

namespace xv::daemon {
namespace {

using grpc::experimental::InterceptionHookPoints;

// Longest target and detail stored per row (both carry caller-supplied text: sanitized, cut at a
// UTF-8 boundary).
constexpr size_t kMaxDetailBytes = 400;
constexpr size_t kMaxTargetBytes = 400;

class AuditInterceptor final : public grpc::experimental::Interceptor {
 public:
  AuditInterceptor(grpc::experimental::ServerRpcInfo* info, const MethodRule* rule,
                   store::Store* store, const Authorizer* authorizer)
      : info_(info), rule_(rule), store_(store), authorizer_(authorizer) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE) &&
        rule_ != nullptr && rule_->target != nullptr && target_.empty()) {
      if (const void* request = methods->GetRecvMessage(); request != nullptr) {
        target_ = rule_->target(request);
      }
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      Record(methods->GetSendStatus());
    }
    methods->Proceed();
  }

 private:
  void Record(const grpc::Status& status) {
    const bool refused = status.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
                         status.error_code() == grpc::StatusCode::PERMISSION_DENIED;
    const bool state_changing = rule_ != nullptr && rule_->state_changing;
    if (!refused && !state_changing) return;
    store::AuditRow row;
    row.method = info_->method();
    row.peer = info_->server_context()->peer();
    Caller caller;
    if (authorizer_ != nullptr && authorizer_->Identify(*info_->server_context(), &caller).ok()) {
      row.caller = caller.Label();
      row.token_id = caller.token_id;
    } else {
      row.caller = "anonymous";
    }
    row.target = SanitizeAndTruncateUtf8(target_, kMaxTargetBytes);
    row.outcome = status.ok() ? "ok" : StatusCodeName(status.error_code());
    row.detail = SanitizeAndTruncateUtf8(status.error_message(), kMaxDetailBytes);
    Status s = store_->audit().Append(row);
    if (!s.ok()) spdlog::warn("audit {}: {}", row.method, s.ToString());
  }

  grpc::experimental::ServerRpcInfo* info_;
  const MethodRule* rule_;
  store::Store* store_;
  const Authorizer* authorizer_;
  std::string target_;
};

}  // namespace

const char* StatusCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::StatusCode::DO_NOT_USE:
      return "DO_NOT_USE";
  }
  return "UNKNOWN";
}

grpc::experimental::Interceptor* AuditInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  return new AuditInterceptor(info, FindMethodRule(info->method()), store_, authorizer_);
}

}  // namespace xv::daemon
