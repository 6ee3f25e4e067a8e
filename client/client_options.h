// ClientOptions: the global options of xvctl, shared by every subcommand.
// Thread-safety: plain value, filled by the command-line parser before any command runs.
#pragma once

#include <string>

namespace xv::client {

struct ClientOptions {
  std::string daemon;     // --daemon; "" = from --state-dir, else xv::DefaultDaemonAddress()
  std::string state_dir;  // --state-dir; "" = xv::DefaultStateDir()

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
