// xv-worker: one per accelerator (or one for the CPU). Dials xvd, registers its device, and runs
// each assigned experiment as a child trainer process, relaying its events. See
// worker/worker_session.h.
#include <signal.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <filesystem>
#include <thread>

#include "common/bearer_token.h"
#include "common/config_file.h"
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

namespace dh = xv::worker::device_health;

// The command line, as given.
struct WorkerFlags {
  std::string daemon = xv::DefaultDaemonAddress();
  std::string data_dir, name, device = "cpu", trainer_bin, work_dir, log_level = "info";
  std::string config_path;
  std::string token_file, tls_ca, tls_cert, tls_key;  // docs/operations.md § Authentication and TLS
  double kill_grace_s = 5.0;
  bool no_probe = false;
  double probe_timeout_s = 120.0;
  dh::MonitorOptions health_opts;
  dh::HealthSourceOptions source_opts;
};

// What the flags resolve to once checked.
struct WorkerSetup {
  std::string device_flag, visible, suffix;  // see ParseDevice
  std::string token;                         // the worker's bearer token ("" = none)
  xv::worker::WorkerConfig config;
};

void AddFlags(CLI::App* app, WorkerFlags* f) {
  app->add_option("--daemon", f->daemon, "xvd address: unix:PATH or HOST:PORT")
      ->capture_default_str();
  app->add_option("--token-file", f->token_file,
                  "file holding this worker's token (first line; default $XV_TOKEN_FILE, else "
                  "$XV_TOKEN); never the token itself on the command line");
  app->add_option("--tls-ca", f->tls_ca,
                  "PEM CA of xvd's certificate: TLS to a HOST:PORT --daemon");
  app->add_option("--tls-cert", f->tls_cert,
                  "PEM client certificate, for an xvd started with --tls-client-ca");
  app->add_option("--tls-key", f->tls_key, "PEM private key of --tls-cert");
  app->add_option("--data", f->data_dir, "data directory made by `xvctl prepare`")->required();
  app->add_option("--name", f->name,
                  "worker name, stable per device (default: HOST-cpu / HOST-gpuN)");
  app->add_option("--device", f->device, "cpu | cuda | cuda:N")->capture_default_str();
  app->add_option("--trainer-bin", f->trainer_bin,
                  "trainer program (default: xv-train beside this binary)");
  app->add_option("--config", f->config_path,
                  "worker config YAML: the trainer plugins this worker offers (docs/worker.md) "
                  "and any of these flags as keys without '--' (daemon: HOST:PORT; flags on the "
                  "command line win; docs/operations.md); default: one libtorch trainer");
  app->add_option("--work-dir", f->work_dir,
                  "where attempts keep recipe.json, spec.json and the trainer's logs "
                  "(default: <state dir>/workers/<name>)");
  app->add_option("--kill-grace", f->kill_grace_s, "seconds between SIGTERM and SIGKILL")
      ->capture_default_str();
  app->add_option("--log-level", f->log_level, "trace | debug | info | warn | error")
      ->capture_default_str();
  // Device health and the probe (docs/worker.md § Device health, § Probe).
  f->health_opts.max_start_temp_c = 85.0;
  app->add_flag("--no-probe", f->no_probe,
                "do not run `xv-train probe` at start (register without measured ceilings)");
  app->add_option("--probe-timeout", f->probe_timeout_s, "seconds the start-up probe may take")
      ->capture_default_str();
  app->add_option("--health-interval", f->health_opts.interval_s,
                  "seconds between device health samples during an attempt")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 60.0));
  app->add_option("--health-source", f->source_opts.source, "auto | nvml | hwmon | none")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "nvml", "hwmon", "none"}));
  app->add_option("--sysfs-root", f->source_opts.sysfs_root, "where hwmon reads sysfs (AMD)")
      ->capture_default_str();
  app->add_option("--max-start-temp", f->health_opts.max_start_temp_c,
                  "thermal guard: wait before an attempt while the device is above this many C "
                  "(0 = off; GPUs only)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 150.0));
  app->add_option("--max-start-wait", f->health_opts.max_start_wait_s,
                  "thermal guard: start anyway after waiting this many seconds")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
}

// Checks the flags and fills in their defaults (name, trainer, work dir; data and work dir made
// absolute). Logs the problem and returns false on a bad flag.
bool ResolveFlags(const CLI::App& app, WorkerFlags* f, WorkerSetup* setup) {
  if (!ParseDevice(f->device, &setup->device_flag, &setup->visible, &setup->suffix)) {
    spdlog::error("--device: expected cpu, cuda or cuda:N, got '{}'", f->device);
    return false;
  }
  if (f->name.empty()) f->name = HostName() + "-" + setup->suffix;
  if (xv::Status ts = xv::ReadClientToken(f->token_file, &setup->token); !ts.ok()) {
    spdlog::error("{}", ts.message());
    return false;
  }
  // xvd refuses a Register whose name is not a valid name (workers_service.cc): say so here, once.
  if (xv::Status nst = xv::CheckTextField("--name", f->name, xv::kMaxNameBytes, /*is_name=*/true);
      !nst.ok()) {
    spdlog::error("{}", nst.message());
    return false;
  }
  setup->config = xv::worker::DefaultWorkerConfig();
  if (!f->config_path.empty()) {
    // The file's flag keys were applied by ParseCommandLineWithConfigFile; here its trainers.
    auto is_flag_key = [&app](const std::string& key) {
      return app.get_option_no_throw("--" + key) != nullptr;
    };
    xv::Status cst = xv::worker::LoadWorkerConfigFile(f->config_path, &setup->config, is_flag_key);
    if (cst.ok()) cst = xv::worker::CheckWorkerConfigPrograms(setup->config);
    if (!cst.ok()) {
      spdlog::error("--config: {}", cst.message());
      return false;
    }
  }
  if (f->trainer_bin.empty()) {
    const xv::worker::TrainerConfig* libtorch = xv::worker::FindTrainer(setup->config, "libtorch");
    f->trainer_bin = libtorch != nullptr && !libtorch->program.empty()
                         ? libtorch->program
                         : xv::SelfExecutableDir() + "/xv-train";
  }
  if (f->work_dir.empty()) f->work_dir = xv::DefaultStateDir() + "/workers/" + f->name;
  std::error_code ec;
  if (!std::filesystem::is_directory(f->data_dir, ec)) {
    spdlog::error("--data: {} is not a directory (make one with: xvctl prepare --out {})",
                  f->data_dir, f->data_dir);
    return false;
  }
  f->data_dir = std::filesystem::absolute(f->data_dir).string();
  f->work_dir = std::filesystem::absolute(f->work_dir).string();
  std::filesystem::create_directories(f->work_dir, ec);
  if (ec) {
    spdlog::error("--work-dir: cannot create {}: {}", f->work_dir, ec.message());
    return false;
  }
  bool offers_libtorch = false;
  for (const auto& t : setup->config.trainers) {
    offers_libtorch |= t.kind == xv::worker::TrainerKind::kLibtorch && t.program.empty();
  }
  if (offers_libtorch && ::access(f->trainer_bin.c_str(), X_OK) != 0) {
    spdlog::warn("--trainer-bin: {} is not executable; experiments will fail until it is",
                 f->trainer_bin);
  }
  return true;
}

// Signals are taken by a watcher thread (sigwait), so every other thread runs with them blocked.
sigset_t BlockStopSignals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return stop_signals;
}

xv::worker::WorkerOptions BuildWorkerOptions(const WorkerFlags& f, const WorkerSetup& setup) {
  xv::worker::WorkerOptions opts;
  opts.daemon_address = f.daemon;
  opts.security.token = setup.token;
  opts.security.tls_ca = f.tls_ca;
  opts.security.tls_cert = f.tls_cert;
  opts.security.tls_key = f.tls_key;
  opts.name = f.name;
  opts.trainer.trainer_bin = f.trainer_bin;
  opts.trainer.trainers = setup.config.trainers;
  opts.trainer.data_dir = f.data_dir;
  opts.trainer.device_flag = setup.device_flag;
  opts.trainer.visible_devices = setup.visible;
  opts.trainer.work_dir = f.work_dir;
  opts.trainer.kill_grace_s = f.kill_grace_s;
#ifdef XV_VERSION
  opts.version = XV_VERSION;
#endif
  return opts;
}

// The device health source for `dev` (or none, saying why) and the thermal guard.
std::unique_ptr<dh::DeviceHealthMonitor> OpenHealthMonitor(WorkerFlags* f, const WorkerSetup& setup,
                                                           const xv::v1::Device& dev) {
  const bool cpu = setup.device_flag == "cpu";
  f->source_opts.vendor = cpu ? "cpu" : dev.vendor();
  f->source_opts.device_index = cpu ? -1 : std::stoi(setup.visible);
  f->source_opts.device_name = dev.name();
  std::string why_none;
  auto health = std::make_unique<dh::DeviceHealthMonitor>(
      dh::OpenHealthSource(f->source_opts, &why_none), f->health_opts);
  if (health->source_kind() == "none") {
    spdlog::info("device health: not sampled ({})", why_none);
    return health;
  }
  const dh::MonitorOptions& h = f->health_opts;
  spdlog::info("device health: {} every {:.2f} s; thermal guard {}", health->description(),
               h.interval_s,
               h.max_start_temp_c > 0 ? fmt::format("at {:.0f} C (waits at most {:.0f} s)",
                                                    h.max_start_temp_c, h.max_start_wait_s)
                                      : std::string("off"));
  return health;
}

// What this worker offers: its trainers, one attempt at a time, the backends and dtypes of its
// device kind.
xv::v1::Capabilities BuildCapabilities(const WorkerSetup& setup) {
  xv::v1::Capabilities caps;
  for (const auto& t : setup.config.trainers) {
    caps.add_trainers(t.name);
    if (t.allow_code_candidates) caps.add_code_candidate_trainers(t.name);
    const bool command = xv::worker::IsCommandLike(t.kind);
    spdlog::info("trainer '{}': {}{}{}{}{}", t.name, xv::worker::TrainerKindName(t.kind),
                 command ? " " : "", command ? t.program : "", t.source.empty() ? "" : " ",
                 t.source);
  }
  caps.set_max_concurrent(1);
  caps.set_sliding_window(true);
  if (setup.device_flag == "cpu") {
    for (const char* b : {"sdpa", "math"}) caps.add_attention_backends(b);
    for (const char* d : {"float32", "bfloat16"}) caps.add_dtypes(d);
  } else {
    for (const char* b : {"flash", "sdpa", "math"}) caps.add_attention_backends(b);
    for (const char* d : {"bfloat16", "float16", "float32"}) caps.add_dtypes(d);
  }
  return caps;
}

// Runs the session until it stops by itself (drain) or a stop signal arrives. The exit code.
int RunUntilStopped(xv::worker::WorkerSession* session, const sigset_t& stop_signals) {
  std::thread watcher([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    if (sig != 0) {
      spdlog::info("received signal {}; stopping", sig);
      session->RequestStop();
    }
  });
  xv::Status st = session->Run();
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"xv-worker: runs xv experiments on one device for xvd"};
  WorkerFlags flags;
  AddFlags(&app, &flags);
  xv::ConfigFileRules config_rules;
  config_rules.other_keys = {"trainers"};  // the trainer plugins, read by ResolveFlags
  if (int exit_code = xv::ParseCommandLineWithConfigFile(&app, argc, argv, config_rules);
      exit_code >= 0) {
    return exit_code;
  }
  xv::SetupLogging("xv-worker", flags.log_level);

  WorkerSetup setup;
  if (!ResolveFlags(app, &flags, &setup)) return 2;
  const sigset_t stop_signals = BlockStopSignals();
  auto launcher = xv::worker::NewPosixProcessLauncher();
  xv::worker::WorkerOptions opts = BuildWorkerOptions(flags, setup);

  spdlog::info("discovering the device: {} fingerprint --device {}", flags.trainer_bin,
               setup.device_flag);
  const xv::v1::Device dev = xv::worker::DiscoverDevice(opts.trainer, launcher.get());
  spdlog::info("device: {} ({}/{})", dev.name(), dev.vendor(), dev.backend());
  std::unique_ptr<dh::DeviceHealthMonitor> health = OpenHealthMonitor(&flags, setup, dev);
  opts.trainer.health = health.get();
  if (!flags.no_probe) {
    opts.probe_json = xv::worker::ObtainDeviceProbe(opts.trainer, launcher.get(), dev,
                                                    flags.probe_timeout_s, nullptr);
  }

  xv::worker::WorkerSession session(opts, dev, BuildCapabilities(setup), launcher.get());
  spdlog::info("xv-worker {} on {} for xvd at {} (data {}, work dir {})", flags.name, flags.device,
               flags.daemon, flags.data_dir, flags.work_dir);
  return RunUntilStopped(&session, stop_signals);
}
