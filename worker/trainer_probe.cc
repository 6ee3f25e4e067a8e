#include "worker/trainer_probe.h"

#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/bounded_json_or_discarded.h"
#include "common/probe_figures.h"
#include "common/steady_clock_time.h"

namespace xv::worker {
namespace {

// The last line of `text` that parses as a JSON object, compact; "" when none.
std::string LastJsonObjectLine(const std::string& text) {
  size_t end = text.size();
  while (end > 0) {
    size_t begin = text.rfind('\n', end - 1);
    begin = begin == std::string::npos ? 0 : begin + 1;
    nlohmann::json j = ParseBoundedJsonOrDiscarded(text.substr(begin, end - begin));
    if (j.is_object()) return j.dump();
    if (begin == 0) break;
    end = begin - 1;
  }
  return "";
}

}  // namespace

Status RunTrainerSubcommand(const TrainerInvocation& inv, ProcessLauncher* launcher,
                            const std::vector<std::string>& args, double timeout_s,
                            std::string* out) {
  ChildSpec cs;
  cs.argv = {inv.trainer_bin};
  cs.argv.insert(cs.argv.end(), args.begin(), args.end());
  cs.env_overrides = {{"CUDA_VISIBLE_DEVICES", inv.visible_devices},
                      {"HIP_VISIBLE_DEVICES", inv.visible_devices}};
  std::unique_ptr<ChildProcess> child;
  XV_RETURN_IF_ERROR(launcher->Launch(cs, &child));
  const std::string what = "`" + inv.trainer_bin + " " + (args.empty() ? "" : args[0]) + "`";
  std::string err;
  const auto t0 = std::chrono::steady_clock::now();
  ExitStatus exit;
  while (true) {
    pollfd fds[2];
    int n = 0;
    if (child->stdout_fd() >= 0) fds[n++] = {child->stdout_fd(), POLLIN, 0};
    if (child->stderr_fd() >= 0) fds[n++] = {child->stderr_fd(), POLLIN, 0};
    if (n == 0) {
      if (child->TryReap(&exit)) break;
      ::usleep(10000);
    } else {
      ::poll(fds, n, 100);
      for (int i = 0; i < n; ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        const bool is_out = fds[i].fd == child->stdout_fd();
        char buf[8192];
        ssize_t r = ::read(fds[i].fd, buf, sizeof(buf));
        if (r > 0) {
          (is_out ? *out : err).append(buf, r);
          if (err.size() > 8192) err.erase(0, err.size() - 4096);
        } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
          is_out ? child->CloseStdout() : child->CloseStderr();
        }
      }
    }
    if (SecondsSince(t0) > timeout_s) {
      (void)child->SignalGroup(SIGKILL);
      return Status::DeadlineExceeded(what + " did not finish within " +
                                      std::to_string(static_cast<int>(timeout_s)) + " s");
    }
  }
  if (!exit.exited || exit.exit_code != 0) {
    std::string last = err.substr(err.size() > 300 ? err.size() - 300 : 0);
    return Status::Unavailable(what + " failed" +
                               (exit.exited ? " with exit code " + std::to_string(exit.exit_code)
                                            : " with signal " + std::to_string(exit.term_signal)) +
                               (last.empty() ? "" : ": " + last));
  }
  return Status::Ok();
}

std::string ProbeCacheKey(const TrainerInvocation& inv, const v1::Device& device) {
  struct stat st {};
  std::string binary = inv.trainer_bin;
  if (::stat(inv.trainer_bin.c_str(), &st) == 0) {
    binary += " size " + std::to_string(st.st_size) + " mtime " + std::to_string(st.st_mtime);
  }
  return binary + " | device " + inv.device_flag + ":" + inv.visible_devices + " | " +
         (device.fingerprint_json().empty() ? device.name() : device.fingerprint_json());
}

std::string ObtainDeviceProbe(const TrainerInvocation& inv, ProcessLauncher* launcher,
                              const v1::Device& device, double timeout_s, bool* from_cache) {
  if (from_cache) *from_cache = false;
  const std::string cache_path = inv.work_dir + "/probe-cache.json";
  const std::string key = ProbeCacheKey(inv, device);
  auto log_figures = [&](const std::string& probe, const std::string& where) {
    ProbeFigures f;
    ParseProbeFigures(probe, &f);
    spdlog::info("device probe ({}): matmul {:.2f} TFLOP/s ({}), bandwidth {:.1f} GB/s", where,
                 f.matmul_tflops, f.matmul_dtype.empty() ? "?" : f.matmul_dtype,
                 f.bandwidth_gb_per_s);
  };
  {
    std::ifstream in(cache_path);
    std::stringstream text;
    text << in.rdbuf();
    nlohmann::json cached = ParseBoundedJsonOrDiscarded(text.str());
    if (cached.is_object() && cached.value("key", "") == key && cached.contains("probe") &&
        cached["probe"].is_object()) {
      std::string probe = cached["probe"].dump();
      if (from_cache) *from_cache = true;
      log_figures(probe, "cached in " + cache_path);
      return probe;
    }
  }
  spdlog::info("probing the device: {} probe --device {} (at most {:.0f} s; --no-probe skips it)",
               inv.trainer_bin, inv.device_flag, timeout_s);
  const auto t0 = std::chrono::steady_clock::now();
  std::string out;
  Status st =
      RunTrainerSubcommand(inv, launcher, {"probe", "--device", inv.device_flag}, timeout_s, &out);
  std::string probe = st.ok() ? LastJsonObjectLine(out) : "";
  if (st.ok() && probe.empty()) st = Status::Unavailable("the probe printed no JSON object");
  if (!st.ok()) {
    spdlog::warn("device probe: {}; registering without a probe", st.message());
    return "";
  }
  const double secs = SecondsSince(t0);
  log_figures(probe, "measured in " + std::to_string(static_cast<int>(secs + 0.5)) + " s");
  nlohmann::json entry = {{"key", key}, {"probe", nlohmann::json::parse(probe)}};
  const std::string tmp = cache_path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << entry.dump() << '\n';
  }
  std::error_code ec;
  std::filesystem::rename(tmp, cache_path, ec);
  if (ec) spdlog::warn("device probe: cannot write {}: {}", cache_path, ec.message());
  return probe;
}

}  // namespace xv::worker
