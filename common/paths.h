// Default locations of xv's state: where xvd keeps its database and socket, and how clients find
// it. Thread-safety: reads the environment; call from any thread.
#pragma once

#include <string>

namespace xv {

// $XV_STATE_DIR if set, else $HOME/.local/state/xv (else ./.xv when HOME is unset).
std::string DefaultStateDir();
// The unix socket of the daemon serving `state_dir`: "<state_dir>/xvd.sock".
std::string SocketPathForStateDir(const std::string& state_dir);
// $XV_DAEMON if set, else "unix:" + SocketPathForStateDir(DefaultStateDir()).
std::string DefaultDaemonAddress();
// Directory holding the running binary (from /proc/self/exe), e.g. to find sibling programs.
std::string SelfExecutableDir();

}  // namespace xv
