// xv-worker: one per accelerator (or one for the CPU). Dials xvd, registers its device, and runs
// each assigned experiment as a child trainer process, relaying its events. See
// worker/worker_session.h.
#include <signal.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <filesystem>
#include <thread>

#include "common/logging.h"
#include "common/paths.h"
#include "common/untrusted_text.h"
#include "worker/child_process.h"
#include "worker/device_discovery.h"
#include "worker/device_health/device_health_monitor.h"
#include "worker/trainer_config.h"
#include "worker/trainer_probe.h"
#include "worker/worker_session.h"

namespace {

std::string HostName() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  return buf;
}

// "cpu" -> ("cpu", "", "cpu"); "cuda:3" -> ("cuda", "3", "gpu3"); "cuda" -> ("cuda", "0", "gpu0").
bool ParseDevice(const std::string& device, std::string* flag, std::string* visible,
                 std::string* suffix) {
  if (device == "cpu") {
    *flag = "cpu";
    *visible = "";
    *suffix = "cpu";
    return true;
  }
  std::string index = "0";
  if (device.rfind("cuda:", 0) == 0) {
    index = device.substr(5);
  } else if (device != "cuda") {
    return false;
  }
  if (index.empty() || index.find_first_not_of("0123456789") != std::string::npos) return false;
  *flag = "cuda";
  *visible = index;
  *suffix = "gpu" + index;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"xv-worker: runs xv experiments on one device for xvd"};
  std::string daemon = xv::DefaultDaemonAddress();
  std::string data_dir, name, device = "cpu", trainer_bin, work_dir, log_level = "info";
  std::string config_path;
  double kill_grace_s = 5.0;
  app.add_option("--daemon", daemon, "xvd address: unix:PATH or HOST:PORT")->capture_default_str();
  app.add_option("--data", data_dir, "data directory made by `xvctl prepare`")->required();
  app.add_option("--name", name, "worker name, stable per device (default: HOST-cpu / HOST-gpuN)");
  app.add_option("--device", device, "cpu | cuda | cuda:N")->capture_default_str();
  app.add_option("--trainer-bin", trainer_bin,
                 "trainer program (default: xv-train beside this binary)");
  app.add_option("--config", config_path,
                 "worker config YAML: the trainer plugins this worker offers (docs/worker.md); "
                 "default: one libtorch trainer");
  app.add_option("--work-dir", work_dir,
                 "where attempts keep recipe.json, spec.json and the trainer's logs "
                 "(default: <state dir>/workers/<name>)");
  app.add_option("--kill-grace", kill_grace_s, "seconds between SIGTERM and SIGKILL")
      ->capture_default_str();
  app.add_option("--log-level", log_level, "trace | debug | info | warn | error")
      ->capture_default_str();
  // Device health and the probe (docs/worker.md § Device health, § Probe).
  bool no_probe = false;
  double probe_timeout_s = 120.0;
  xv::worker::device_health::MonitorOptions health_opts;
  health_opts.max_start_temp_c = 85.0;
  xv::worker::device_health::HealthSourceOptions source_opts;
  app.add_flag("--no-probe", no_probe,
               "do not run `xv-train probe` at start (register without measured ceilings)");
  app.add_option("--probe-timeout", probe_timeout_s, "seconds the start-up probe may take")
      ->capture_default_str();
  app.add_option("--health-interval", health_opts.interval_s,
                 "seconds between device health samples during an attempt")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 60.0));
  app.add_option("--health-source", source_opts.source, "auto | nvml | hwmon | none")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "nvml", "hwmon", "none"}));
  app.add_option("--sysfs-root", source_opts.sysfs_root, "where hwmon reads sysfs (AMD)")
      ->capture_default_str();
  app.add_option("--max-start-temp", health_opts.max_start_temp_c,
                 "thermal guard: wait before an attempt while the device is above this many C "
                 "(0 = off; GPUs only)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 150.0));
  app.add_option("--max-start-wait", health_opts.max_start_wait_s,
                 "thermal guard: start anyway after waiting this many seconds")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  CLI11_PARSE(app, argc, argv);

  xv::SetupLogging("xv-worker", log_level);
  std::string device_flag, visible, suffix;
  if (!ParseDevice(device, &device_flag, &visible, &suffix)) {
    spdlog::error("--device: expected cpu, cuda or cuda:N, got '{}'", device);
    return 2;
  }
  if (name.empty()) name = HostName() + "-" + suffix;
  // xvd refuses a Register whose name is not a valid name (workers_service.cc): say so here, once.
  if (xv::Status nst = xv::CheckTextField("--name", name, xv::kMaxNameBytes, /*is_name=*/true);
      !nst.ok()) {
    spdlog::error("{}", nst.message());
    return 2;
  }
  xv::worker::WorkerConfig worker_config = xv::worker::DefaultWorkerConfig();
  if (!config_path.empty()) {
    xv::Status cst = xv::worker::LoadWorkerConfigFile(config_path, &worker_config);
    if (cst.ok()) cst = xv::worker::CheckWorkerConfigPrograms(worker_config);
    if (!cst.ok()) {
      spdlog::error("--config: {}", cst.message());
      return 2;
    }
  }
  if (trainer_bin.empty()) {
    const xv::worker::TrainerConfig* libtorch = xv::worker::FindTrainer(worker_config, "libtorch");
    trainer_bin = libtorch != nullptr && !libtorch->program.empty()
                      ? libtorch->program
                      : xv::SelfExecutableDir() + "/xv-train";
  }
  if (work_dir.empty()) work_dir = xv::DefaultStateDir() + "/workers/" + name;
  std::error_code ec;
  if (!std::filesystem::is_directory(data_dir, ec)) {
    spdlog::error("--data: {} is not a directory (make one with: xvctl prepare --out {})", data_dir,
                  data_dir);
    return 2;
  }
  data_dir = std::filesystem::absolute(data_dir).string();
  work_dir = std::filesystem::absolute(work_dir).string();
  std::filesystem::create_directories(work_dir, ec);
  if (ec) {
    spdlog::error("--work-dir: cannot create {}: {}", work_dir, ec.message());
    return 2;
  }
  bool offers_libtorch = false;
  for (const auto& t : worker_config.trainers) {
    offers_libtorch |= t.kind == xv::worker::TrainerKind::kLibtorch && t.program.empty();
  }
  if (offers_libtorch && ::access(trainer_bin.c_str(), X_OK) != 0) {
    spdlog::warn("--trainer-bin: {} is not executable; experiments will fail until it is",
                 trainer_bin);
  }

  // Signals are taken by a watcher thread (sigwait), so every other thread runs with them blocked.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto launcher = xv::worker::NewPosixProcessLauncher();
  xv::worker::WorkerOptions opts;
  opts.daemon_address = daemon;
  opts.name = name;
  opts.trainer.trainer_bin = trainer_bin;
  opts.trainer.trainers = worker_config.trainers;
  opts.trainer.data_dir = data_dir;
  opts.trainer.device_flag = device_flag;
  opts.trainer.visible_devices = visible;
  opts.trainer.work_dir = work_dir;
  opts.trainer.kill_grace_s = kill_grace_s;
#ifdef XV_VERSION
  opts.version = XV_VERSION;
#endif

  spdlog::info("discovering the device: {} fingerprint --device {}", trainer_bin, device_flag);
  xv::v1::Device dev = xv::worker::DiscoverDevice(opts.trainer, launcher.get());
  spdlog::info("device: {} ({}/{})", dev.name(), dev.vendor(), dev.backend());
  source_opts.vendor = device_flag == "cpu" ? "cpu" : dev.vendor();
  source_opts.device_index = device_flag == "cpu" ? -1 : std::stoi(visible);
  source_opts.device_name = dev.name();
  std::string why_none;
  xv::worker::device_health::DeviceHealthMonitor health(
      xv::worker::device_health::OpenHealthSource(source_opts, &why_none), health_opts);
  if (health.source_kind() == "none") {
    spdlog::info("device health: not sampled ({})", why_none);
  } else {
    spdlog::info("device health: {} every {:.2f} s; thermal guard {}", health.description(),
                 health_opts.interval_s,
                 health_opts.max_start_temp_c > 0
                     ? fmt::format("at {:.0f} C (waits at most {:.0f} s)",
                                   health_opts.max_start_temp_c, health_opts.max_start_wait_s)
                     : std::string("off"));
  }
  opts.trainer.health = &health;
  if (!no_probe) {
    opts.probe_json =
        xv::worker::ObtainDeviceProbe(opts.trainer, launcher.get(), dev, probe_timeout_s, nullptr);
  }
  xv::v1::Capabilities caps;
  for (const auto& t : worker_config.trainers) {
    caps.add_trainers(t.name);
    spdlog::info("trainer '{}': {}{}{}", t.name, xv::worker::TrainerKindName(t.kind),
                 t.kind == xv::worker::TrainerKind::kCommand ? " " : "",
                 t.kind == xv::worker::TrainerKind::kCommand ? t.program : "");
  }
  caps.set_max_concurrent(1);
  caps.set_sliding_window(true);
  if (device_flag == "cpu") {
    for (const char* b : {"sdpa", "math"}) caps.add_attention_backends(b);
    for (const char* d : {"float32", "bfloat16"}) caps.add_dtypes(d);
  } else {
    for (const char* b : {"flash", "sdpa", "math"}) caps.add_attention_backends(b);
    for (const char* d : {"bfloat16", "float16", "float32"}) caps.add_dtypes(d);
  }

  xv::worker::WorkerSession session(opts, dev, caps, launcher.get());
  std::thread watcher([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    if (sig != 0) {
      spdlog::info("received signal {}; stopping", sig);
      session.RequestStop();
    }
  });
  spdlog::info("xv-worker {} on {} for xvd at {} (data {}, work dir {})", name, device, daemon,
               data_dir, work_dir);
  xv::Status st = session.Run();
  // Wake the watcher if the session ended on its own (drain).
  pthread_kill(watcher.native_handle(), SIGTERM);
  watcher.join();
  if (!st.ok()) {
    spdlog::error("{}", st.ToString());
    return 1;
  }
  spdlog::info("xv-worker stopped");
  return 0;
}
