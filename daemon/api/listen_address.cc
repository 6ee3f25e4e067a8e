#include "daemon/api/listen_address.h"

#include <cctype>

namespace xv::daemon {
namespace {

// HOST:PORT or none, without the loopback policy.
Status ParseHostPort(const std::string& text, const std::string& flag, ListenAddress* out) {
  ListenAddress a;
  if (text == "none" || text.empty()) {
    *out = a;
    return Status::Ok();
  }
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    return Status::InvalidArgument(flag + " " + text + ": expected HOST:PORT or none");
  }
  a.host = text.substr(0, colon);
  std::string port = text.substr(colon + 1);
  if (port.size() > 5) return Status::InvalidArgument(flag + " " + text + ": bad port");
  for (char c : port) {
    if (!std::isdigit(static_cast<unsigned char>(c))) {
      return Status::InvalidArgument(flag + " " + text + ": port must be a number");
    }
  }
  a.port = std::stoi(port);
  if (a.port > 65535) return Status::InvalidArgument(flag + " " + text + ": port above 65535");
  a.loopback = IsLoopbackHost(a.host);
  a.enabled = true;
  *out = a;
  return Status::Ok();
}

}  // namespace

bool IsLoopbackHost(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "[::1]";
}

Status ParseListenAddress(const std::string& text, ListenAddress* out) {
  return ParseListenAddress(text, std::string("--listen"), out);
}

Status ParseListenAddress(const std::string& text, const std::string& flag, ListenAddress* out) {
  ListenAddress a;
  XV_RETURN_IF_ERROR(ParseHostPort(text, flag, &a));
  if (a.enabled && !a.loopback) {
    if (flag == "--http") {
      return Status::InvalidArgument(
          flag + " " + text +
          ": only loopback addresses (127.0.0.1, localhost, [::1]) are allowed; the dashboard "
          "has no TLS: serve it remotely through an HTTPS reverse proxy or an SSH tunnel");
    }
    return Status::InvalidArgument(
        flag + " " + text +
        ": only loopback addresses (127.0.0.1, localhost, [::1]) are allowed without TLS; a "
        "remote listener needs --tls-cert FILE and --tls-key FILE (and tokens: "
        "docs/operations.md § Authentication and TLS)");
  }
  *out = a;
  return Status::Ok();
}

Status ParseTcpListenAddress(const std::string& text, bool tls, ListenAddress* out) {
  if (!tls) return ParseListenAddress(text, std::string("--listen"), out);
  return ParseHostPort(text, "--listen", out);
}

std::string DefaultHttpAddress(const std::string& listen) {
  if (listen.empty() || listen == "none") return "off";
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return "off";  // --listen itself is refused
  std::string host = listen.substr(0, colon);
  if (!IsLoopbackHost(host)) host = "127.0.0.1";
  if (listen.substr(colon + 1) == "0") return host + ":0";
  return host + ":" + std::to_string(kDefaultHttpPort);
}

}  // namespace xv::daemon
