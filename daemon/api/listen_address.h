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

}  // namespace xv::daemon
