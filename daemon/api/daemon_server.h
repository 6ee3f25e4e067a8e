// DaemonServer: one running xvd service: the store (DIR/xv.db), the dispatcher, and the gRPC server
// on a unix socket (0660, accepted by xvd itself for its peers' uids: unix_socket_acceptor.h) and
// optionally a TCP port: loopback in plaintext, or any address with TLS. Every call is authorized
// (authorizer.h) and state-changing or refused calls are audited (audit_interceptor.h). The state
// dir is kept at most 0750 and the database files at most 0640
// (daemon/api/state_dir_permissions.h). main.cc wraps it with flags, the state-dir lock and
// signals; tests start it in-process. Thread-safety: Start/Shutdown/Wait from one controlling
// thread; the services run on gRPC's threads.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>

#include "common/status.h"
#include "daemon/api/audit_interceptor.h"
#include "daemon/api/authorizer.h"
#include "daemon/api/caller_rate_limiter.h"
#include "daemon/api/campaigns_service.h"
#include "daemon/api/experiments_service.h"
#include "daemon/api/listen_address.h"
#include "daemon/api/plans_service.h"
#include "daemon/api/tokens_service.h"
#include "daemon/api/unix_socket_acceptor.h"
#include "daemon/api/watch_hub.h"
#include "daemon/api/workers_service.h"
#include "daemon/engine/daemon_loop.h"
#include "daemon/engine/dispatcher.h"
#include "daemon/engine/event_writer.h"
#include "daemon/engine/plan_runner.h"
#include "daemon/engine/round_closer.h"
#include "daemon/engine/submission_builder.h"
#include "daemon/store/store.h"
#include "daemon/web/dashboard_reader.h"
#include "daemon/web/dashboard_router.h"
#include "daemon/web/dashboard_server.h"
#include "daemon/web/health_check.h"

namespace xv::daemon {

struct DaemonOptions {
  std::string state_dir;                  // required; holds xv.db, xvd.sock, xvd.port
  std::string socket_path;                // "" = <state_dir>/xvd.sock
  std::string listen = "127.0.0.1:7470";  // HOST:PORT or "none"; port 0 picks one. Non-loopback
                                          // needs tls_cert and tls_key, and turns tokens on
  // TLS of the TCP listener: PEM files of the server's certificate (chain) and key, both or
  // neither. With tls_client_ca, every TCP client must present a certificate it signed.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  // Calls need a token (or the daemon's uid on the unix socket) even before the first token is
  // created (xvd --require-tokens). Without it, tokens apply once one exists.
  bool require_tokens = false;
  // The read-only dashboard and /metrics (daemon/web/): loopback HOST:PORT, or "off"/"none". Off in
  // the library; xvd's --http picks the default (docs/dashboard.md). Port 0 picks one.
  std::string http = "off";
  // /healthz and /readyz alone (daemon/web/health_check.h) on HOST:PORT, any address (the replies
  // carry nothing but ready or not), or "off". They are also served on `http` when it is on.
  std::string health_listen = "off";
  DispatcherOptions dispatcher;
  SubmissionLimits limits;
  int max_message_bytes = 8 * 1024 * 1024;
  // The daemon loop (daemon/engine/daemon_loop.h): lease checks, scheduling, ready rounds, plans
  // and store upkeep this often.
  int tick_ms = 250;
  // While the database refuses writes (read-only mode), a write is retried this often.
  int write_retry_ms = 5000;
  // WAL upkeep: a PASSIVE checkpoint this often, a TRUNCATE one after this long without commits
  // (and a PASSIVE one whenever the WAL reaches wal_checkpoint_pages pages).
  int wal_checkpoint_ms = 60000;
  int wal_idle_ms = 10000;
  int wal_checkpoint_pages = 1000;
  // Watch: events queued per watcher before a slow one is sent a `dropped` marker instead.
  int watch_queue_capacity = 4096;
  // Watch streams open at once (served without a thread each); one more is RESOURCE_EXHAUSTED.
  int max_watch_streams = 256;
  // The synchronous methods (every RPC but Watch; each worker session holds one for its life):
  // threads serving them at once (grpc::ResourceQuota; beyond it gRPC answers RESOURCE_EXHAUSTED),
  // and concurrent calls per connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS; more wait).
  int max_rpc_threads = 256;
  int max_streams_per_connection = 128;
  // Per-caller token bucket of the state-changing calls (daemon/api/caller_rate_limiter.h).
  RateLimitOptions rate_limit;
};

class DaemonServer {
 public:
  // Opens the store (migrations; the integrity check runs in the background), removes a stale
  // socket, starts listening and the daemon loop. InvalidArgument naming the flags for a
  // non-loopback listen without TLS, half a TLS pair or a TLS file that cannot be read. When TCP is
  // on, writes the bound port to <state_dir>/xvd.port; when the dashboard is on, its port to
  // <state_dir>/http.port; the health listener's to <state_dir>/health.port.
  static Status Start(const DaemonOptions& options, std::unique_ptr<DaemonServer>* out);
  ~DaemonServer();  // Shutdown()s

  const std::string& socket_path() const { return socket_path_; }
  int tcp_port() const { return tcp_port_; }        // 0 when TCP is off
  int http_port() const { return http_port_; }      // 0 when the dashboard is off
  int health_port() const { return health_port_; }  // 0 when --health-listen is off
  store::Store* store() { return store_.get(); }
  Dispatcher* dispatcher() { return dispatcher_.get(); }
  WatchHub* watch_hub() { return watch_hub_.get(); }

  // Stops accepting calls, ends worker sessions, lets in-flight writes finish, removes the socket
  // and port files. Idempotent. Unary calls still running get kShutdownGrace to answer; after it
  // their replies are cancelled (their handlers still finish before the store closes).
  void Shutdown();
  static constexpr std::chrono::milliseconds kShutdownGrace{200};

 private:
  DaemonServer() = default;

  // The steps of Start, in order.
  Status OpenStore(const DaemonOptions& options);
  Status StartWatchHub(const DaemonOptions& options);
  Status ClaimSocket(const DaemonOptions& options);
  void BuildEngine(const DaemonOptions& options);
  void BuildServices(const DaemonOptions& options);
  Status StartAuthorizer(const DaemonOptions& options, const ListenAddress& tcp);
  Status StartGrpcServer(const DaemonOptions& options, const ListenAddress& tcp);
  void ConfigureServerBuilder(const DaemonOptions& options, grpc::ServerBuilder* builder);
  Status StartDashboard(const DaemonOptions& options, const ListenAddress& http);
  Status StartHealthListener(const DaemonOptions& options);

  std::unique_ptr<WatchHub> watch_hub_;  // outlives store_ (its commit listener signals the hub)
  std::unique_ptr<CallerRateLimiter> rate_limiter_;  // outlives the services
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<Dispatcher> dispatcher_;
  std::unique_ptr<EventWriter> event_writer_;  // stopped after the sessions end, before store_
  std::unique_ptr<RoundCloser> closer_;
  std::unique_ptr<ExperimentsService> experiments_;
  std::unique_ptr<CampaignsService> campaigns_;
  std::unique_ptr<PlanRunner> plan_runner_;
  std::unique_ptr<DaemonLoop> loop_;  // stopped before dispatcher_, closer_ and plan_runner_ go
  std::unique_ptr<PlansService> plans_;
  std::unique_ptr<WorkersService> workers_;
  UnixPeerRegistry unix_peers_;             // outlives authorizer_ and the acceptor
  std::unique_ptr<Authorizer> authorizer_;  // outlives the services
  std::unique_ptr<TokensService> tokens_;
  std::unique_ptr<AuditService> audit_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<UnixSocketAcceptor> unix_acceptor_;  // stopped before server_ shuts down
  // The dashboard: its own read-only connections, router and HTTP threads (stopped before store_).
  std::unique_ptr<web::DashboardReader> dashboard_reader_;
  std::unique_ptr<web::DashboardRouter> dashboard_router_;
  std::unique_ptr<web::DashboardServer> dashboard_;
  // /healthz and /readyz: on the dashboard's listener and on their own (--health-listen).
  std::unique_ptr<web::HealthCheck> health_;
  std::unique_ptr<web::DashboardServer> health_server_;
  std::string health_port_file_;
  int health_port_ = 0;
  std::string http_port_file_;
  int http_port_ = 0;
  std::string socket_path_;
  std::string port_file_;
  int tcp_port_ = 0;
  bool shut_down_ = false;
};

}  // namespace xv::daemon
