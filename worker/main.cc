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
#include "worker/child_process.h"
#include "worker/device_discovery.h"
#include "worker/trainer_config.h"
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
  CLI11_PARSE(app, argc, argv);

  xv::SetupLogging("xv-worker", log_level);
  std::string device_flag, visible, suffix;
  if (!ParseDevice(device, &device_flag, &visible, &suffix)) {
    spdlog::error("--device: expected cpu, cuda or cuda:N, got '{}'", device);
    return 2;
  }
  if (name.empty()) name = HostName() + "-" + suffix;
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
