// UnparsableRequestInterceptor: what a client hears when its request cannot be parsed.
//
// gRPC C++ 1.51 parses a request before any handler runs; when protobuf refuses it (most often a
// proto3 string field holding invalid UTF-8, which protobuf will not parse), the call ends with
// INTERNAL and an empty message, and the client cannot tell what it did wrong. This server
// interceptor notices, for calls with one request message (unary and server-streaming), that the
// request did not parse (its POST_RECV_MESSAGE has no message), and turns that INTERNAL into
// INVALID_ARGUMENT saying why, the method and what to do. The field itself is not known here:
// protobuf names it only in the daemon's log ("String field 'xv.v1.Candidate.name' contains
// invalid UTF-8 data when parsing a protocol buffer").
// Thread-safety: one interceptor per call, used by that call only; the factory is stateless.
#pragma once

#include <string>

#include <grpcpp/support/server_interceptor.h>

namespace xv::daemon {

// The message the client gets for an unparsable request of `method` ("/xv.v1.Experiments/Submit").
std::string UnparsableRequestMessage(const char* method);

class UnparsableRequestInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  // nullptr (no interceptor) for client- and bidi-streaming calls, whose reads end the stream.
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;
};

}  // namespace xv::daemon
