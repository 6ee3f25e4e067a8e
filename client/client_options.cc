#include "client/client_options.h"

#include "common/bearer_token.h"
#include "common/paths.h"

namespace xv::client {

std::string ClientOptions::DaemonAddress() const {
  if (!daemon.empty()) return daemon;
  if (!state_dir.empty()) return "unix:" + SocketPathForStateDir(state_dir);
  return DefaultDaemonAddress();
}

Status ClientOptions::LoadToken() { return ReadClientToken(token_file, &token); }

std::string ClientOptions::StateDir() const {
  return state_dir.empty() ? DefaultStateDir() : state_dir;
}

}  // namespace xv::client
