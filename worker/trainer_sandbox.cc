#include "worker/trainer_sandbox.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
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

std::string Parent(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return "";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Inside a folder every sandbox binds anyway.
bool IsSystemPath(const std::string& path) {
  for (const char* top : {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc"}) {
    const std::string t = top;
    if (path == t || path.rfind(t + "/", 0) == 0) return true;
  }
  return false;
}

// The installation prefix of a program's folder: the folder above `bin`, else the folder itself.
std::string PrefixOf(const std::string& folder) {
  return BaseName(folder) == "bin" ? Parent(folder) : folder;
}

// pyvenv.cfg's `home = FOLDER` (the base interpreter's bin folder), or "".
std::string VenvHome(const std::string& venv_root) {
  std::ifstream cfg(venv_root + "/pyvenv.cfg");
  std::string line;
  while (std::getline(cfg, line)) {
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string key = line.substr(0, eq), value = line.substr(eq + 1);
    key.erase(key.find_last_not_of(" \t") + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    value.erase(value.find_last_not_of(" \t\r") + 1);
    if (key == "home") return value;
  }
  return "";
}

std::string RealPath(const std::string& path) {
  char* resolved = ::realpath(path.c_str(), nullptr);
  if (resolved == nullptr) return "";
  std::string out = resolved;
  std::free(resolved);
  return out;
}

}  // namespace

std::vector<std::string> ProgramReadOnlyFolders(const std::string& program) {
  std::vector<std::string> folders;
  auto add = [&folders](const std::string& folder) {
    // Never the root itself (the whole host), nor a relative path.
    if (folder.size() < 2 || folder[0] != '/' || IsSystemPath(folder)) return;
    if (std::find(folders.begin(), folders.end(), folder) == folders.end()) {
      folders.push_back(folder);
    }
  };
  const std::string folder = Parent(program);
  const bool in_venv = BaseName(folder) == "bin" && Exists(Parent(folder) + "/pyvenv.cfg");
  add(in_venv ? Parent(folder) : folder);
  const std::string real = RealPath(program);
  if (!real.empty() && Parent(real) != folder) add(PrefixOf(Parent(real)));
  if (in_venv) {
    const std::string home = VenvHome(Parent(folder));
    if (!home.empty()) add(PrefixOf(home));
  }
  return folders;
}

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
  if (!gpu_nodes.empty() && Exists("/sys")) a.insert(a.end(), {"--ro-bind", "/sys", "/sys"});
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
