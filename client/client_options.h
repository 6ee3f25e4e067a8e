// ClientOptions: the global options of xvctl, shared by every subcommand.
// Thread-safety: plain value, filled by the command-line parser before any command runs.
#pragma once

#include <string>

#include "common/status.h"

namespace xv::client {

struct ClientOptions {
  std::string daemon;     // --daemon; "" = from --state-dir, else xv::DefaultDaemonAddress()
  std::string state_dir;  // --state-dir; "" = xv::DefaultStateDir()
  // Authentication and TLS (docs/operations.md § Authentication and TLS).
  std::string token_file;  // --token-file; "" = $XV_TOKEN_FILE, else $XV_TOKEN
  std::string token;       // read from the above once the command line is parsed (LoadToken)
  std::string tls_ca;      // --tls-ca: TLS to a TCP --daemon
  std::string tls_cert;    // --tls-cert / --tls-key: a client certificate
  std::string tls_key;

  // Reads the token (common/bearer_token.h ReadClientToken); errors name the flag or variable.
  Status LoadToken();

  // The address to dial: --daemon, else the socket of --state-dir, else $XV_DAEMON / the default.
  std::string DaemonAddress() const;
  // --state-dir, else xv::DefaultStateDir().
  std::string StateDir() const;
};

// Exit codes of every xvctl command (docs/xvctl.md § Exit codes).
constexpr int kExitOk = 0;
constexpr int kExitError = 1;      // daemon unreachable, not found, I/O, anything else
constexpr int kExitInvalid = 2;    // usage: an unknown or missing argument or option, a bad value,
                                   // an invalid recipe or override (the message names it)
constexpr int kExitTimeout = 124;  // `wait --timeout` expired (as timeout(1))

}  // namespace xv::client
