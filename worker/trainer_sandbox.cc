#include "worker/trainer_sandbox.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <sstream>

namespace xv::worker {
namespace {

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

bool IsSymlink(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

std::string LinkTarget(const std::string& path) {
  char buf[4096];
  const ssize_t n = ::readlink(path.c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

}  // namespace

std::vector<std::string> HostGpuDeviceNodes() {
  std::vector<std::string> nodes;
  if (DIR* d = ::opendir("/dev")) {
    while (struct dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name.rfind("nvidia", 0) == 0) nodes.push_back("/dev/" + name);
    }
    ::closedir(d);
  }
  for (const char* p : {"/dev/dri", "/dev/kfd"}) {
    if (Exists(p)) nodes.push_back(p);
  }
  std::sort(nodes.begin(), nodes.end());
  return nodes;
}

std::vector<std::string> BubblewrapArguments(const SandboxMounts& mounts,
                                             const std::vector<std::string>& gpu_nodes) {
  std::vector<std::string> a = {kBubblewrapPath, "--die-with-parent", "--unshare-net",
                                "--unshare-ipc", "--unshare-uts"};
  // The system, read-only; merged-/usr links stay links.
  a.insert(a.end(), {"--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"});
  for (const char* top : {"/bin", "/sbin", "/lib", "/lib32", "/lib64"}) {
    if (IsSymlink(top)) {
      a.insert(a.end(), {"--symlink", LinkTarget(top), top});
    } else if (Exists(top)) {
      a.insert(a.end(), {"--ro-bind", top, top});
    }
  }
  a.insert(a.end(), {"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"});
  for (const std::string& node : gpu_nodes) a.insert(a.end(), {"--dev-bind", node, node});
  a.insert(a.end(), {"--ro-bind", mounts.data_dir, mounts.data_dir});
  for (const std::string& path : mounts.read_only) a.insert(a.end(), {"--ro-bind", path, path});
  a.insert(a.end(), {"--bind", mounts.attempt_dir, mounts.attempt_dir});
  a.insert(a.end(), {"--chdir", mounts.attempt_dir, "--"});
  return a;
}

Status SandboxedChild(const SandboxMounts& mounts, ChildSpec* child) {
  if (::access(kBubblewrapPath, X_OK) != 0) {
    return Status::FailedPrecondition(std::string("sandbox: ") + kBubblewrapPath +
                                      " not found (apt-get install bubblewrap)");
  }
  std::vector<std::string> paths = mounts.read_only;
  paths.push_back(mounts.attempt_dir);
  paths.push_back(mounts.data_dir);
  for (const std::string& p : paths) {
    if (p.empty() || p[0] != '/') {
      return Status::InvalidArgument("sandbox: mount path '" + p + "' is not absolute");
    }
  }
  std::vector<std::string> argv = BubblewrapArguments(mounts, HostGpuDeviceNodes());
  argv.insert(argv.end(), child->argv.begin(), child->argv.end());
  child->argv = std::move(argv);
  // TMPDIR and HOME inside are the private /tmp (the real home is not there).
  child->env_overrides.emplace_back("TMPDIR", "/tmp");
  child->env_overrides.emplace_back("HOME", "/tmp");
  return Status::Ok();
}

std::string SandboxDenial(const std::string& stderr_tail) {
  static const char* const kSigns[] = {"Read-only file system",   "Permission denied",
                                       "Operation not permitted", "No such file or directory",
                                       "Network is unreachable",  "Connection refused"};
  std::istringstream lines(stderr_tail);
  std::string line;
  while (std::getline(lines, line)) {
    for (const char* sign : kSigns) {
      if (line.find(sign) != std::string::npos) return line;
    }
  }
  return "";
}

}  // namespace xv::worker
