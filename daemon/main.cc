// xvd: the xv daemon. Owns the SQLite database of a state directory and serves the Experiments and
// Workers gRPC services on a unix socket and (by default) 127.0.0.1:7470.
//
//   xvd [--config FILE] --state-dir DIR [--socket PATH] [--listen HOST:PORT|none]
//       [--http 127.0.0.1:PORT|off] [--tls-cert FILE --tls-key FILE [--tls-client-ca FILE]]
//       [--require-tokens]
//       [--log-level info]
//       [--lease-ms 15000] [--heartbeat-ms 2000] [--max-watch-streams 256] [--max-rpc-threads 256]
//       [--rate-limit 60] [--rate-burst 600] ...   (xvd --help lists every flag)
//
// umask 027: the state dir is 0750 and the database 0640 (daemon/api/state_dir_permissions.h).
// SIGTERM/SIGINT: stop accepting, end worker sessions, finish writes, exit 0.
#include <malloc.h>
#include <signal.h>
#include <sys/stat.h>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <cstdlib>
#include <memory>
#include <string>

#include "common/config_file.h"
#include "common/logging.h"
#include "common/paths.h"
#include "daemon/api/daemon_server.h"
#include "daemon/api/listen_address.h"
#include "daemon/api/state_dir_lock.h"

namespace {

// Where the daemon keeps its state, listens and logs.
void AddPlaceFlags(CLI::App* app, xv::daemon::DaemonOptions* options, std::string* http,
                   std::string* log_level) {
  app->add_option("--state-dir", options->state_dir,
                  "state directory: xv.db, xvd.sock, xvd.pid, xvd.port (default $XV_STATE_DIR or "
                  "~/.local/state/xv)");
  app->add_option("--socket", options->socket_path,
                  "unix socket path (default STATE_DIR/xvd.sock)");
  app->add_option("--listen", options->listen,
                  "TCP address HOST:PORT (0 picks one, written to STATE_DIR/xvd.port) or none; "
                  "a non-loopback host needs --tls-cert and --tls-key, and requires tokens")
      ->capture_default_str();
  app->add_option("--http", *http,
                  "read-only dashboard and /metrics, loopback only: 127.0.0.1:PORT (0 picks one, "
                  "written to STATE_DIR/http.port) or off. Default: --listen's host with port "
                  "8470; off with --listen none; port 0 with --listen HOST:0");
  app->add_option("--health-listen", options->health_listen,
                  "/healthz and /readyz alone, plain HTTP on any address: HOST:PORT (0.0.0.0:8471 "
                  "for a kubelet's probes; 0 picks a port, written to STATE_DIR/health.port) or "
                  "off. Both are also served on --http")
      ->capture_default_str();
  app->add_option("--log-level", *log_level, "trace|debug|info|warn|error")->capture_default_str();
}

// TLS of the TCP listener and the token rule (docs/operations.md § Authentication and TLS).
void AddSecurityFlags(CLI::App* app, xv::daemon::DaemonOptions* options) {
  app->add_option("--tls-cert", options->tls_cert,
                  "PEM certificate (chain) of the TCP listener: it serves TLS (with --tls-key)");
  app->add_option("--tls-key", options->tls_key, "PEM private key of --tls-cert");
  app->add_option("--tls-client-ca", options->tls_client_ca,
                  "PEM CA certificate(s): TCP clients must present a certificate signed by it");
  app->add_flag("--require-tokens", options->require_tokens,
                "every call needs a token (or, on the unix socket, the daemon's own uid or root) "
                "even before the first token is created; without it, tokens apply once one "
                "exists");
}

// Leases, heartbeats and store upkeep.
void AddEngineFlags(CLI::App* app, xv::daemon::DaemonOptions* options) {
  app->add_option("--lease-ms", options->dispatcher.lease_ms,
                  "a worker silent this long loses its attempts (requeued up to the campaign's "
                  "max attempts)")
      ->capture_default_str()
      ->check(CLI::Range(100, 3600 * 1000));
  app->add_option("--heartbeat-ms", options->dispatcher.heartbeat_interval_ms,
                  "heartbeat interval asked of workers")
      ->capture_default_str()
      ->check(CLI::Range(50, 600 * 1000));
  app->add_option("--write-retry-ms", options->write_retry_ms,
                  "in read-only mode (disk full, read-only file), retry a write this often")
      ->capture_default_str()
      ->check(CLI::Range(10, 3600 * 1000));
  app->add_option("--wal-checkpoint-ms", options->wal_checkpoint_ms,
                  "checkpoint the SQLite WAL (PASSIVE) this often")
      ->capture_default_str()
      ->check(CLI::Range(100, 24 * 3600 * 1000));
  app->add_option(
         "--wal-idle-ms", options->wal_idle_ms,
         "after this long without writes, checkpoint with TRUNCATE (empties the -wal file)")
      ->capture_default_str()
      ->check(CLI::Range(10, 24 * 3600 * 1000));
}

// Bounds on the work clients may ask for.
void AddLimitFlags(CLI::App* app, xv::daemon::DaemonOptions* options) {
  app->add_option("--watch-queue", options->watch_queue_capacity,
                  "events queued per `xvctl watch` client before a slow one gets a dropped marker")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app->add_option("--max-watch-streams", options->max_watch_streams,
                  "Watch streams (xvctl watch, agents) open at once; one more is refused with "
                  "RESOURCE_EXHAUSTED")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  app->add_option("--max-rpc-threads", options->max_rpc_threads,
                  "threads serving the other calls at once (each connected worker holds one); "
                  "beyond it calls are refused with RESOURCE_EXHAUSTED")
      ->capture_default_str()
      ->check(CLI::Range(16, 1 << 16));
  app->add_option("--max-streams-per-connection", options->max_streams_per_connection,
                  "concurrent calls on one client connection (more wait their turn)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 16));
  app->add_option(
         "--rate-limit", options->rate_limit.per_second,
         "state-changing calls (submit, cancel, campaign/plan changes) per second per "
         "caller, sustained; 0 turns the limit off. Every unix-socket client is one caller")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  app->add_option("--rate-burst", options->rate_limit.burst,
                  "state-changing calls a caller may make at once after a quiet spell")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 1e7));
}

// Signals are taken synchronously by the main thread; every other thread inherits the block.
sigset_t BlockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return signals;
}

// Memory (issue 18): glibc gives each thread that allocates under contention an arena of its own,
// up to 8 per core, and keeps what was freed in it; xvd's ~150 threads (a session reader per
// worker, gRPC's pollers) made the resident peak grow with the event stream's length. At most
// kMallocArenas arenas (MALLOC_ARENA_MAX in the environment still wins). docs/operations.md
// § Memory.
constexpr int kMallocArenas = 4;
// And each arena keeps up to kMallocTrimBytes free at its top instead of glibc's 128 KiB: the
// dispatcher's and the writers' threads allocate and free a few hundred KiB per pass or
// transaction, and glibc gave it back (madvise) and faulted it in again every time: a fifth of the
// dispatcher thread's CPU, 10-20 % of xvd's CPU per run with 8 workers (bench/README.md). Setting
// it also ends glibc's moving mmap threshold, so allocations up to kMallocMmapBytes come from the
// arenas. At most kMallocArenas x kMallocTrimBytes stays resident beyond what is in use. The
// environment (MALLOC_TRIM_THRESHOLD_, GLIBC_TUNABLES) still wins.
constexpr int kMallocTrimBytes = 8 << 20;
constexpr int kMallocMmapBytes = 4 << 20;
void BoundMallocArenas() {
  auto unset = [](const char* name) {
    const char* env = std::getenv(name);
    return env == nullptr || *env == '\0';
  };
  if (unset("MALLOC_ARENA_MAX") && mallopt(M_ARENA_MAX, kMallocArenas) != 1) {
    spdlog::debug("mallopt(M_ARENA_MAX) refused");
  }
  if (unset("MALLOC_TRIM_THRESHOLD_") && unset("GLIBC_TUNABLES")) {
    if (mallopt(M_MMAP_THRESHOLD, kMallocMmapBytes) != 1 ||
        mallopt(M_TRIM_THRESHOLD, kMallocTrimBytes) != 1) {
      spdlog::debug("mallopt(M_MMAP_THRESHOLD, M_TRIM_THRESHOLD) refused");
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  BoundMallocArenas();
  CLI::App app{"xvd: the xv daemon (experiments database, scheduler, gRPC API)"};
  xv::daemon::DaemonOptions options;
  options.state_dir = xv::DefaultStateDir();
  std::string log_level = "info";
  std::string http;
  AddPlaceFlags(&app, &options, &http, &log_level);
  AddSecurityFlags(&app, &options);
  AddEngineFlags(&app, &options);
  AddLimitFlags(&app, &options);
  std::string config_file;
  app.add_option("--config", config_file,
                 "YAML file of flags: each key a long flag without '--' (state-dir: /var/lib/xv); "
                 "flags on the command line win (docs/operations.md)");
  if (int exit_code = xv::ParseCommandLineWithConfigFile(&app, argc, argv, xv::ConfigFileRules());
      exit_code >= 0) {
    return exit_code;
  }
  // Files xvd creates (the database, its WAL, the pid and port files) are not for other accounts;
  // DaemonServer also tightens the state dir and the database files whatever the umask.
  ::umask(027);
  options.http = http.empty() ? xv::daemon::DefaultHttpAddress(options.listen) : http;
  xv::SetupLogging("xvd", log_level);
  sigset_t signals = BlockStopSignals();

  std::unique_ptr<xv::daemon::StateDirLock> lock;
  xv::Status s = xv::daemon::StateDirLock::Acquire(options.state_dir, &lock);
  if (!s.ok()) {
    spdlog::error("{}", s.ToString());
    return 1;
  }
  std::unique_ptr<xv::daemon::DaemonServer> server;
  s = xv::daemon::DaemonServer::Start(options, &server);
  if (!s.ok()) {
    spdlog::error("{}", s.ToString());
    return 1;
  }
  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("signal {}: shutting down", sig);
  server->Shutdown();  // every write is committed and the database closed from here on
  lock.reset();        // the pid file goes, and the flock with it
  spdlog::info("stopped");
  spdlog::shutdown();  // flushes the log
  // Not `server.reset()`: destroying the last grpc::Server runs grpc_shutdown, which in gRPC 1.51
  // could wait about 10 s for its executor thread (seen under gdb in epoll_wait), so xvd
  // sometimes missed a 5 s stop deadline. Nothing is left to save: the process ends here.
  std::_Exit(0);
}
