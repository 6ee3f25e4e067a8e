#include "daemon/api/unparsable_request_interceptor.h"

#include <string>

namespace xv::daemon {
namespace {

using grpc::experimental::InterceptionHookPoints;

class UnparsableRequestInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit UnparsableRequestInterceptor(const char* method) : method_(method) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE) &&
        methods->GetRecvMessage() == nullptr) {
      unparsed_ = true;
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS) && unparsed_) {
      const grpc::Status status = methods->GetSendStatus();
      // The synchronous API reports a request it cannot parse as INTERNAL, the callback API
      // (Watch) as UNIMPLEMENTED; neither says why.
      if (status.error_code() == grpc::StatusCode::INTERNAL ||
          status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
        methods->ModifySendStatus(
            grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, UnparsableRequestMessage(method_)));
      }
    }
    methods->Proceed();
  }

 private:
  const char* const method_;
  bool unparsed_ = false;
};

}  // namespace

std::string UnparsableRequestMessage(const char* method) {
  return std::string("request: could not be parsed as the request of ") +
         (method != nullptr ? method : "this call") +
         ": a string field holds invalid UTF-8 (proto3 string fields must be valid UTF-8: send "
         "text, and escape or encode binary data), or the bytes are not a valid protobuf "
         "encoding of the request";
}

grpc::experimental::Interceptor* UnparsableRequestInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  using Type = grpc::experimental::ServerRpcInfo::Type;
  if (info->type() != Type::UNARY && info->type() != Type::SERVER_STREAMING) return nullptr;
  return new UnparsableRequestInterceptor(info->method());
}

}  // namespace xv::daemon
