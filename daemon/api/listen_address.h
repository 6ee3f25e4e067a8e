// Parsing and policy of xvd's TCP listen address: without TLS (not configured in this version) only
// loopback addresses are allowed.
#pragma once

#include <string>

#include "common/status.h"

namespace xv::daemon {

struct ListenAddress {
  bool enabled = false;  // false for "none"
  std::string host;      // 127.0.0.1 | localhost | [::1]
  int port = 0;          // 0: the kernel picks one
  std::string ToString() const { return host + ":" + std::to_string(port); }
};

// Parses "HOST:PORT" or "none". InvalidArgument (naming --listen) for a malformed address, a port
// outside 0..65535, or a non-loopback host.
Status ParseListenAddress(const std::string& text, ListenAddress* out);
// The same rule for another listener's flag (e.g. "--http"): errors name `flag`.
Status ParseListenAddress(const std::string& text, const std::string& flag, ListenAddress* out);

// The dashboard's default port (xvd --http).
inline constexpr int kDefaultHttpPort = 8470;
// The dashboard's address when --http is not given, derived from --listen: "off" for "none" (no TCP
// listener at all), "HOST:0" for "HOST:0" (an ephemeral port, as tests use), else "HOST:8470".
std::string DefaultHttpAddress(const std::string& listen);

}  // namespace xv::daemon
