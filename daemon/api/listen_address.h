// Parsing and policy of xvd's TCP listen addresses: plaintext only on loopback; a non-loopback
// --listen needs TLS (--tls-cert and --tls-key); the dashboard's --http is loopback only (it has
// no TLS: put an HTTPS reverse proxy or an SSH tunnel in front of it).
#pragma once

#include <string>

#include "common/status.h"

namespace xv::daemon {

struct ListenAddress {
  bool enabled = false;  // false for "none"
  std::string host;      // 127.0.0.1 | localhost | [::1], or (with TLS) any host
  int port = 0;          // 0: the kernel picks one
  bool loopback = false;
  std::string ToString() const { return host + ":" + std::to_string(port); }
};

// Parses "HOST:PORT" or "none". InvalidArgument (naming --listen) for a malformed address, a port
// outside 0..65535, or a non-loopback host.
Status ParseListenAddress(const std::string& text, ListenAddress* out);
// The same rule for another listener's flag (e.g. "--http"): errors name `flag`.
Status ParseListenAddress(const std::string& text, const std::string& flag, ListenAddress* out);
// --listen when `tls` says whether --tls-cert and --tls-key are given: a non-loopback host is
// allowed with TLS; without, it is InvalidArgument naming --listen, --tls-cert and --tls-key.
Status ParseTcpListenAddress(const std::string& text, bool tls, ListenAddress* out);
// True for 127.0.0.1, localhost and [::1].
bool IsLoopbackHost(const std::string& host);

// The dashboard's default port (xvd --http).
inline constexpr int kDefaultHttpPort = 8470;
// The dashboard's address when --http is not given, derived from --listen: "off" for "none" (no TCP
// listener at all), "HOST:0" for "HOST:0" (an ephemeral port, as tests use), else "HOST:8470";
// 127.0.0.1 in place of a non-loopback HOST (the dashboard is loopback only).
std::string DefaultHttpAddress(const std::string& listen);

}  // namespace xv::daemon
