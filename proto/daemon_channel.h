// How xvctl, `xvctl mcp` and xv-worker dial xvd (docs/operations.md § Authentication and TLS):
// plaintext on a unix socket or loopback TCP, TLS on TCP when a CA is given (and a client
// certificate when xvd asks for one), and the caller's bearer token on every call as the
// `authorization: Bearer TOKEN` metadata (a client interceptor, so every stub on the channel
// sends it). Hand-written, beside the generated code: it links gRPC and xv_common only.
// Thread-safety: OpenDaemonChannel is a pure function of its arguments and the files they name;
// the channel it returns is thread-safe.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/channel.h>
#include <grpcpp/support/channel_arguments.h>

#include "common/status.h"

namespace xv {

struct DaemonChannelSecurity {
  std::string token;     // "" = calls carry no token (common/bearer_token.h ReadClientToken)
  std::string tls_ca;    // --tls-ca: PEM CA that signed xvd's certificate; "" = no TLS
  std::string tls_cert;  // --tls-cert / --tls-key: a client certificate (xvd --tls-client-ca)
  std::string tls_key;
};

// A channel to `address` ("unix:PATH" or "HOST:PORT"). TLS only for a TCP address with tls_ca.
// InvalidArgument naming the flag for a file that cannot be read, or half a client pair.
Status OpenDaemonChannel(const std::string& address, const DaemonChannelSecurity& security,
                         const grpc::ChannelArguments& args, std::shared_ptr<grpc::Channel>* out);

}  // namespace xv
