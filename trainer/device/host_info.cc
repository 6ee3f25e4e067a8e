#include "trainer/device/host_info.h"

#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace xv::trainer {

namespace {

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\"");
  size_t e = s.find_last_not_of(" \t\"\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// Value of the first "key<sep>value" line of `path` whose key (trimmed) equals `key`.
std::string FirstField(const std::string& path, const std::string& key, char sep) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    size_t pos = line.find(sep);
    if (pos == std::string::npos) continue;
    if (Trim(line.substr(0, pos)) == key) return Trim(line.substr(pos + 1));
  }
  return "";
}

}  // namespace

HostInfo ReadHostInfo() {
  HostInfo h;
  h.cpu_model = FirstField("/proc/cpuinfo", "model name", ':');
  if (h.cpu_model.empty()) h.cpu_model = "unknown";
  h.cpu_vendor = FirstField("/proc/cpuinfo", "vendor_id", ':');
  h.cpu_count = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  std::string mem = FirstField("/proc/meminfo", "MemTotal", ':');  // "24567890 kB"
  if (!mem.empty()) h.memory_bytes = std::stoll(mem) * 1024;
  struct utsname u;
  if (uname(&u) == 0) h.os = std::string(u.sysname) + " " + u.release + " " + u.machine;
  h.os_release = FirstField("/etc/os-release", "PRETTY_NAME", '=');
  return h;
}

int64_t PeakResidentBytes() {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return static_cast<int64_t>(ru.ru_maxrss) * 1024;  // Linux reports KiB
}

}  // namespace xv::trainer
