#include "daemon/api/listen_address.h"

#include <cctype>

namespace xv::daemon {

Status ParseListenAddress(const std::string& text, ListenAddress* out) {
  return ParseListenAddress(text, "--listen", out);
}

Status ParseListenAddress(const std::string& text, const std::string& flag, ListenAddress* out) {
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
  if (a.host != "127.0.0.1" && a.host != "localhost" && a.host != "[::1]") {
    return Status::InvalidArgument(
        flag + " " + text +
        ": only loopback addresses (127.0.0.1, localhost, [::1]) are allowed; remote listeners "
        "need TLS and a token, which this xvd does not configure yet");
  }
  a.enabled = true;
  *out = a;
  return Status::Ok();
}

std::string DefaultHttpAddress(const std::string& listen) {
  if (listen.empty() || listen == "none") return "off";
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return "off";  // --listen itself is refused
  const std::string host = listen.substr(0, colon);
  if (listen.substr(colon + 1) == "0") return host + ":0";
  return host + ":" + std::to_string(kDefaultHttpPort);
}

}  // namespace xv::daemon
