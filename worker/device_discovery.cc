#include "worker/device_discovery.h"

#include <poll.h>
#include <signal.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/bounded_json_or_discarded.h"
#include "common/steady_clock_time.h"

namespace xv::worker {
namespace {

std::string StringField(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  return it->dump();
}

}  // namespace

Status DeviceFromFingerprintJson(const std::string& json_text, v1::Device* device) {
  nlohmann::json j = ParseBoundedJsonOrDiscarded(json_text);
  if (!j.is_object()) return Status::InvalidArgument("fingerprint: not a JSON object");
  device->Clear();
  // The first key present wins: the proto's names, then xv-train's own (driver_version, ...).
  auto first_of = [&](std::initializer_list<const char*> keys) {
    for (const char* k : keys) {
      std::string v = StringField(j, k);
      if (!v.empty()) return v;
    }
    return std::string();
  };
  device->set_name(first_of({"name", "device_name"}));
  device->set_backend(first_of({"backend"}));
  // vendor is nvidia | amd | cpu; a CPU fingerprint's vendor string ("AuthenticAMD") stays in
  // fingerprint_json.
  std::string vendor = first_of({"vendor"});
  const std::string& backend = device->backend();
  if (backend == "cpu") {
    vendor = "cpu";
  } else if (vendor != "nvidia" && vendor != "amd") {
    vendor = backend == "rocm" ? "amd" : backend == "cuda" ? "nvidia" : vendor;
  }
  device->set_vendor(vendor);
  device->set_index(backend == "cpu" ? -1 : 0);
  for (const char* k : {"index", "device_index"}) {
    if (j.contains(k) && j[k].is_number_integer()) {
      device->set_index(j[k].get<int>());
      break;
    }
  }
  if (j.contains("memory_bytes") && j["memory_bytes"].is_number()) {
    device->set_memory_bytes(j["memory_bytes"].get<int64_t>());
  }
  device->set_driver(first_of({"driver", "driver_version"}));
  device->set_runtime(first_of({"runtime", "runtime_version"}));
  device->set_torch_version(first_of({"torch_version", "libtorch_version"}));
  device->set_os(first_of({"os"}));
  device->set_hostname(first_of({"hostname"}));
  if (device->hostname().empty()) {
    struct utsname u;
    if (::uname(&u) == 0) device->set_hostname(u.nodename);
  }
  for (const char* key : {"env_knobs", "env"}) {
    if (!j.contains(key) || !j[key].is_object()) continue;
    for (auto& [k, v] : j[key].items()) {
      if (v.is_null()) continue;  // unset variables
      (*device->mutable_env_knobs())[k] = v.is_string() ? v.get<std::string>() : v.dump();
    }
    break;
  }
  if (j.contains("peak_flops") && j["peak_flops"].is_number()) {
    device->set_peak_flops(j["peak_flops"].get<double>());
  }
  device->set_peak_flops_source(first_of({"peak_flops_source"}));
  device->set_fingerprint_json(json_text);
  if (device->name().empty()) return Status::InvalidArgument("fingerprint: missing field 'name'");
  return Status::Ok();
}

v1::Device MinimalCpuDevice() {
  v1::Device d;
  std::string model = "unknown";
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) {
        model = line.substr(colon + 1);
        model.erase(0, model.find_first_not_of(' '));
      }
      break;
    }
  }
  d.set_name("cpu: " + model);
  d.set_vendor("cpu");
  d.set_backend("cpu");
  d.set_index(-1);
  struct utsname u;
  if (::uname(&u) == 0) {
    d.set_os(std::string(u.sysname) + " " + u.release);
    d.set_hostname(u.nodename);
  }
  d.set_peak_flops_source("unknown");
  return d;
}

v1::Device DiscoverDevice(const TrainerInvocation& inv, ProcessLauncher* launcher,
                          double timeout_s) {
  auto fallback = [&](const std::string& why) {
    spdlog::warn("device discovery: {}; registering a minimal CPU fingerprint", why);
    return MinimalCpuDevice();
  };
  ChildSpec cs;
  cs.argv = {inv.trainer_bin, "fingerprint", "--device", inv.device_flag};
  cs.env_overrides = {{"CUDA_VISIBLE_DEVICES", inv.visible_devices},
                      {"HIP_VISIBLE_DEVICES", inv.visible_devices}};
  std::unique_ptr<ChildProcess> child;
  Status st = launcher->Launch(cs, &child);
  if (!st.ok()) return fallback(st.message());
  std::string out, err;
  const auto t0 = std::chrono::steady_clock::now();
  ExitStatus exit;
  bool reaped = false;
  while (true) {
    pollfd fds[2];
    int n = 0;
    if (child->stdout_fd() >= 0) fds[n++] = {child->stdout_fd(), POLLIN, 0};
    if (child->stderr_fd() >= 0) fds[n++] = {child->stderr_fd(), POLLIN, 0};
    if (n == 0) {
      if (child->TryReap(&exit)) {
        reaped = true;
        break;
      }
      ::usleep(10000);
    } else {
      ::poll(fds, n, 100);
      for (int i = 0; i < n; ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        bool is_out = fds[i].fd == child->stdout_fd();
        char buf[8192];
        ssize_t r = ::read(fds[i].fd, buf, sizeof(buf));
        if (r > 0) {
          (is_out ? out : err).append(buf, r);
        } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
          is_out ? child->CloseStdout() : child->CloseStderr();
        }
      }
    }
    if (SecondsSince(t0) > timeout_s) {
      (void)child->SignalGroup(SIGKILL);
      return fallback("`" + inv.trainer_bin + " fingerprint` did not finish within " +
                      std::to_string(static_cast<int>(timeout_s)) + " s");
    }
  }
  if (!reaped || !exit.exited || exit.exit_code != 0) {
    std::string last = err.substr(err.size() > 300 ? err.size() - 300 : 0);
    return fallback("`" + inv.trainer_bin + " fingerprint` failed" +
                    (exit.exited ? " with exit code " + std::to_string(exit.exit_code)
                                 : " with signal " + std::to_string(exit.term_signal)) +
                    (last.empty() ? "" : ": " + last));
  }
  // The fingerprint is the last non-empty line that parses as a JSON object (or the whole output).
  v1::Device device;
  st = DeviceFromFingerprintJson(out, &device);
  if (!st.ok()) {
    size_t end = out.find_last_not_of(" \n\r\t");
    if (end != std::string::npos) {
      size_t begin = out.rfind('\n', end);
      begin = begin == std::string::npos ? 0 : begin + 1;
      st = DeviceFromFingerprintJson(out.substr(begin, end - begin + 1), &device);
    }
  }
  if (!st.ok()) return fallback(st.message());
  return device;
}

}  // namespace xv::worker
