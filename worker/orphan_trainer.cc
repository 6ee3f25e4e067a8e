#include "worker/orphan_trainer.h"

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <chrono>
#include <fstream>
#include <iterator>
#include <thread>
#include <vector>

#include "common/steady_clock_time.h"

namespace xv::worker {
namespace {

// Pids (other than this process) whose environment has an entry that starts with `prefix`.
std::vector<pid_t> ProcessesWithEnvEntry(const std::string& prefix) {
  std::vector<pid_t> out;
  DIR* proc = ::opendir("/proc");
  if (!proc) return out;
  while (dirent* e = ::readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 1 || *end != '\0' || pid == ::getpid()) continue;
    std::ifstream f(std::string("/proc/") + e->d_name + "/environ", std::ios::binary);
    if (!f) continue;  // gone, or another user's
    std::string env((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    size_t start = 0;
    while (start < env.size()) {
      size_t nul = env.find('\0', start);
      if (nul == std::string::npos) nul = env.size();
      if (nul - start > prefix.size() && env.compare(start, prefix.size(), prefix) == 0) {
        out.push_back(static_cast<pid_t>(pid));
        break;
      }
      start = nul + 1;
    }
  }
  ::closedir(proc);
  return out;
}

}  // namespace

int KillOrphanedTrainers(const std::string& work_dir, double wait_s) {
  const std::string needle = "XV_SPEC_DIR=" + work_dir + "/";
  std::vector<pid_t> found = ProcessesWithEnvEntry(needle);
  for (pid_t pid : found) {
    pid_t group = ::getpgid(pid);
    spdlog::warn("killing orphaned trainer process {} (group {}) left in {} by a previous worker",
                 pid, group, work_dir);
    if (group > 1 && group != ::getpgrp()) (void)::kill(-group, SIGKILL);
    (void)::kill(pid, SIGKILL);
  }
  const auto t0 = std::chrono::steady_clock::now();
  while (!found.empty() && !ProcessesWithEnvEntry(needle).empty()) {
    if (SecondsSince(t0) > wait_s) {
      spdlog::warn("orphaned trainer processes of {} are still there after {:.0f} s", work_dir,
                   wait_s);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return static_cast<int>(found.size());
}

}  // namespace xv::worker
