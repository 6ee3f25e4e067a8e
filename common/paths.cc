#include "common/paths.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

namespace xv {

std::string DefaultStateDir() {
  if (const char* s = std::getenv("XV_STATE_DIR"); s != nullptr && *s != '\0') return s;
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return std::string(home) + "/.local/state/xv";
  }
  return ".xv";
}

std::string SocketPathForStateDir(const std::string& state_dir) { return state_dir + "/xvd.sock"; }

std::string DefaultDaemonAddress() {
  if (const char* d = std::getenv("XV_DAEMON"); d != nullptr && *d != '\0') return d;
  return "unix:" + SocketPathForStateDir(DefaultStateDir());
}

std::string SelfExecutableDir() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string path(buf, static_cast<size_t>(n));
  auto slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

}  // namespace xv
