#include "proto/daemon_channel.h"

#include <fstream>
#include <iterator>
#include <vector>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/client_interceptor.h>

namespace xv {
namespace {

using grpc::experimental::InterceptionHookPoints;

// Adds `authorization: Bearer TOKEN` to each call's initial metadata.
class BearerTokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit BearerTokenInterceptor(const std::string* header) : header_(header) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", *header_});
    }
    methods->Proceed();
  }

 private:
  const std::string* header_;
};

class BearerTokenInterceptorFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerTokenInterceptorFactory(const std::string& token) : header_("Bearer " + token) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new BearerTokenInterceptor(&header_);
  }

 private:
  const std::string header_;  // lives as long as the channel (which owns the factory)
};

Status ReadPem(const std::string& flag, const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument(flag + " " + path + ": cannot read the file");
  out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return Status::Ok();
}

Status Credentials(const std::string& address, const DaemonChannelSecurity& security,
                   std::shared_ptr<grpc::ChannelCredentials>* out) {
  if (security.tls_cert.empty() != security.tls_key.empty()) {
    return Status::InvalidArgument("--tls-cert and --tls-key: give both or neither");
  }
  if (security.tls_ca.empty() || address.rfind("unix:", 0) == 0) {
    if (!security.tls_cert.empty() && security.tls_ca.empty()) {
      return Status::InvalidArgument("--tls-cert: needs --tls-ca (the CA of xvd's certificate)");
    }
    *out = grpc::InsecureChannelCredentials();
    return Status::Ok();
  }
  grpc::SslCredentialsOptions ssl;
  XV_RETURN_IF_ERROR(ReadPem("--tls-ca", security.tls_ca, &ssl.pem_root_certs));
  if (!security.tls_cert.empty()) {
    XV_RETURN_IF_ERROR(ReadPem("--tls-cert", security.tls_cert, &ssl.pem_cert_chain));
    XV_RETURN_IF_ERROR(ReadPem("--tls-key", security.tls_key, &ssl.pem_private_key));
  }
  *out = grpc::SslCredentials(ssl);
  return Status::Ok();
}

}  // namespace

Status OpenDaemonChannel(const std::string& address, const DaemonChannelSecurity& security,
                         const grpc::ChannelArguments& args, std::shared_ptr<grpc::Channel>* out) {
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  XV_RETURN_IF_ERROR(Credentials(address, security, &credentials));
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> creators;
  if (!security.token.empty()) {
    creators.push_back(std::make_unique<BearerTokenInterceptorFactory>(security.token));
  }
  *out = grpc::experimental::CreateCustomChannelWithInterceptors(address, credentials, args,
                                                                 std::move(creators));
  return Status::Ok();
}

}  // namespace xv
