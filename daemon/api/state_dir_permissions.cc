#include "daemon/api/state_dir_permissions.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <spdlog/spdlog.h>

namespace xv::daemon {
namespace {

std::string Octal(mode_t mode) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(mode));
  return buf;
}

// Removes from `path`'s permission bits those outside `allowed`; a missing path is ok when
// missing_ok.
Status RestrictMode(const std::string& path, mode_t allowed, bool missing_ok) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT && missing_ok) return Status::Ok();
    return Status::IoError(path + ": cannot read its permissions: " + std::strerror(errno));
  }
  const mode_t mode = st.st_mode & 07777;
  if ((mode & 0777 & ~allowed) == 0) return Status::Ok();
  const mode_t restricted = mode & (allowed | 07000);  // setgid and sticky bits stay
  if (::chmod(path.c_str(), restricted) != 0) {
    return Status::IoError(path + ": cannot restrict its permissions from " + Octal(mode) + " to " +
                           Octal(restricted) + ": " + std::strerror(errno) +
                           " (chmod it, or run xvd as its owner)");
  }
  spdlog::info("{}: permissions {:04o} -> {:04o} (others must not read the database)", path, mode,
               restricted);
  return Status::Ok();
}

}  // namespace

Status RestrictStateDirPermissions(const std::string& state_dir) {
  return RestrictMode(state_dir, 0750, /*missing_ok=*/false);
}

Status RestrictDatabaseFilePermissions(const std::string& db_path) {
  for (const char* suffix : {"", "-wal", "-shm"}) {
    XV_RETURN_IF_ERROR(RestrictMode(db_path + suffix, 0640, /*missing_ok=*/true));
  }
  return Status::Ok();
}

}  // namespace xv::daemon
