#include "daemon/api/daemon_server.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include <grpcpp/resource_quota.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/server_posix.h>
#include <spdlog/spdlog.h>

#include "daemon/api/listen_address.h"
#include "daemon/api/state_dir_lock.h"
#include "daemon/api/state_dir_permissions.h"
#include "daemon/api/unparsable_request_interceptor.h"

#ifndef XV_VERSION
#define XV_VERSION "dev"
#endif

namespace xv::daemon {

namespace {

// The receive window of each gRPC stream, in bytes (ConfigureServerBuilder): HTTP/2's default.
constexpr int kStreamWindowBytes = 64 * 1024;

std::string DatabasePath(const DaemonOptions& options) { return options.state_dir + "/xv.db"; }

// The state dir exists, at most 0750.
Status PrepareStateDir(const std::string& state_dir) {
  std::error_code ec;
  std::filesystem::create_directories(state_dir, ec);
  if (ec) return Status::IoError(state_dir + ": cannot create: " + ec.message());
  return RestrictStateDirPermissions(state_dir);
}

DaemonLoopOptions LoopOptions(const DaemonOptions& options) {
  DaemonLoopOptions loop;
  loop.tick_ms = options.tick_ms;
  loop.write_retry_ms = options.write_retry_ms;
  loop.wal_checkpoint_ms = options.wal_checkpoint_ms;
  loop.wal_idle_ms = options.wal_idle_ms;
  return loop;
}

// Writes "<port>\n" to `path` through a temporary file and a rename, so that a reader that sees
// the file (a script or test polling for it) never reads it empty or half written.
void WritePortFile(const std::string& path, int port) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << port << "\n";
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) spdlog::warn("cannot write {}", path);
}

// The whole of a PEM file named by `flag`.
Status ReadPemFile(const std::string& flag, const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument(flag + " " + path + ": cannot read the file");
  out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (out->find("-----BEGIN") == std::string::npos) {
    return Status::InvalidArgument(flag + " " + path + ": not a PEM file (no -----BEGIN line)");
  }
  return Status::Ok();
}

// Both TLS files or neither; a client CA only with them.
Status CheckTlsFlags(const DaemonOptions& options) {
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return Status::InvalidArgument("--tls-cert and --tls-key: give both or neither");
  }
  if (!options.tls_client_ca.empty() && options.tls_cert.empty()) {
    return Status::InvalidArgument("--tls-client-ca: needs --tls-cert and --tls-key");
  }
  return Status::Ok();
}

// The TCP listener's credentials: TLS from the PEM files when they are given, else plaintext
// (loopback only: ParseListenAddress refused anything else).
Status TcpCredentials(const DaemonOptions& options, std::shared_ptr<grpc::ServerCredentials>* out) {
  if (options.tls_cert.empty()) {
    *out = grpc::InsecureServerCredentials();
    return Status::Ok();
  }
  grpc::SslServerCredentialsOptions ssl;
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  XV_RETURN_IF_ERROR(ReadPemFile("--tls-cert", options.tls_cert, &pair.cert_chain));
  XV_RETURN_IF_ERROR(ReadPemFile("--tls-key", options.tls_key, &pair.private_key));
  ssl.pem_key_cert_pairs.push_back(pair);
  if (!options.tls_client_ca.empty()) {
    XV_RETURN_IF_ERROR(ReadPemFile("--tls-client-ca", options.tls_client_ca, &ssl.pem_root_certs));
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  *out = grpc::SslServerCredentials(ssl);
  return Status::Ok();
}

}  // namespace

Status DaemonServer::Start(const DaemonOptions& options, std::unique_ptr<DaemonServer>* out) {
  if (options.state_dir.empty()) return Status::InvalidArgument("--state-dir: required");
  XV_RETURN_IF_ERROR(CheckTlsFlags(options));
  ListenAddress tcp;
  XV_RETURN_IF_ERROR(ParseTcpListenAddress(options.listen, !options.tls_cert.empty(), &tcp));
  ListenAddress http;
  if (options.http != "off") XV_RETURN_IF_ERROR(ParseListenAddress(options.http, "--http", &http));
  XV_RETURN_IF_ERROR(PrepareStateDir(options.state_dir));

  std::unique_ptr<DaemonServer> d(new DaemonServer());
  XV_RETURN_IF_ERROR(d->OpenStore(options));
  XV_RETURN_IF_ERROR(d->StartWatchHub(options));
  XV_RETURN_IF_ERROR(d->ClaimSocket(options));
  XV_RETURN_IF_ERROR(d->StartAuthorizer(options, tcp));
  d->BuildEngine(options);
  d->BuildServices(options);
  XV_RETURN_IF_ERROR(d->StartGrpcServer(options, tcp));
  d->health_ = std::make_unique<web::HealthCheck>(
      [st = d->store_.get()] { return st->database().WriteFault(); }, DatabasePath(options));
  if (http.enabled) XV_RETURN_IF_ERROR(d->StartDashboard(options, http));
  XV_RETURN_IF_ERROR(d->StartHealthListener(options));
  d->dispatcher_->StartPassThread();
  d->loop_->Start();
  d->health_->SetServing(true);
  spdlog::info("xvd {} listening on unix:{}{}{}; tokens {}", XV_VERSION, d->socket_path_,
               tcp.enabled ? " and " + tcp.host + ":" + std::to_string(d->tcp_port_) : "",
               tcp.enabled && !options.tls_cert.empty() ? " (TLS)" : "",
               d->authorizer_->enforcing() ? "required" : "off (none created yet)");
  *out = std::move(d);
  return Status::Ok();
}

Status DaemonServer::OpenStore(const DaemonOptions& options) {
  const std::string db_path = DatabasePath(options);
  XV_RETURN_IF_ERROR(store::Store::Open(db_path, &store_));
  XV_RETURN_IF_ERROR(RestrictDatabaseFilePermissions(db_path));
  spdlog::info("database {} (schema version {})", db_path, store_->database().schema_version());
  // No worker is connected to a daemon that just started.
  return store_->workers().MarkAllWorkersOffline();
}

Status DaemonServer::StartWatchHub(const DaemonOptions& options) {
  WatchHubOptions hub_options;
  hub_options.queue_capacity = static_cast<size_t>(options.watch_queue_capacity);
  hub_options.max_streams = static_cast<size_t>(std::max(0, options.max_watch_streams));
  watch_hub_ = std::make_unique<WatchHub>(store_.get(), hub_options);
  WatchHub* hub = watch_hub_.get();
  store_->database().SetCommitListener([hub] { hub->Notify(); }, options.wal_checkpoint_pages);
  return watch_hub_->Start();
}

Status DaemonServer::ClaimSocket(const DaemonOptions& options) {
  socket_path_ =
      options.socket_path.empty() ? options.state_dir + "/xvd.sock" : options.socket_path;
  return RemoveStaleSocket(socket_path_);
}

Status DaemonServer::StartAuthorizer(const DaemonOptions& options, const ListenAddress& tcp) {
  AuthorizerOptions auth;
  // A listener other machines reach always needs tokens, created or not.
  auth.require_tokens = options.require_tokens || (tcp.enabled && !tcp.loopback);
  auth.owner_uid = ::geteuid();
  authorizer_ = std::make_unique<Authorizer>(store_.get(), &unix_peers_, auth);
  return authorizer_->Load();
}

void DaemonServer::BuildEngine(const DaemonOptions& options) {
  dispatcher_ = std::make_unique<Dispatcher>(store_.get(), options.dispatcher);
  // A stored Finished frees its worker: the dispatcher's next pass places work on it.
  event_writer_ = std::make_unique<EventWriter>(
      store_.get(), [dispatcher = dispatcher_.get()] { dispatcher->RequestSchedule(); });
  closer_ = std::make_unique<RoundCloser>(store_.get());
  plan_runner_ =
      std::make_unique<PlanRunner>(store_.get(), dispatcher_.get(), closer_.get(), options.limits);
  loop_ = std::make_unique<DaemonLoop>(store_.get(), dispatcher_.get(), closer_.get(),
                                       plan_runner_.get(), LoopOptions(options));
}

void DaemonServer::BuildServices(const DaemonOptions& options) {
  experiments_ = std::make_unique<ExperimentsService>(store_.get(), dispatcher_.get(),
                                                      options.limits, XV_VERSION, closer_.get());
  campaigns_ = std::make_unique<CampaignsService>(store_.get(), dispatcher_.get(), closer_.get(),
                                                  options.limits);
  workers_ = std::make_unique<WorkersService>(store_.get(), dispatcher_.get(), event_writer_.get());
  plans_ = std::make_unique<PlansService>(store_.get(), dispatcher_.get(), campaigns_.get(),
                                          plan_runner_.get());
  experiments_->SetWatchHub(watch_hub_.get());
  rate_limiter_ = std::make_unique<CallerRateLimiter>(options.rate_limit);
  experiments_->SetRateLimiter(rate_limiter_.get());
  campaigns_->SetRateLimiter(rate_limiter_.get());
  plans_->SetRateLimiter(rate_limiter_.get());
  experiments_->SetAuthorizer(authorizer_.get());
  campaigns_->SetAuthorizer(authorizer_.get());
  plans_->SetAuthorizer(authorizer_.get());
  workers_->SetAuthorizer(authorizer_.get());
  tokens_ = std::make_unique<TokensService>(authorizer_.get());
  audit_ = std::make_unique<AuditService>(store_.get(), authorizer_.get());
}

void DaemonServer::ConfigureServerBuilder(const DaemonOptions& options,
                                          grpc::ServerBuilder* builder) {
  builder->SetMaxReceiveMessageSize(options.max_message_bytes);
  // Bounded work for the synchronous methods: threads at once, calls per connection.
  grpc::ResourceQuota quota("xvd");
  quota.SetMaxThreads(options.max_rpc_threads);
  builder->SetResourceQuota(quota);
  builder->AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_streams_per_connection);
  // Workers send HTTP/2 keepalive pings every 10 s to notice a dead connection (a network cut)
  // within the lease; accept them even when the daemon has nothing to send (gRPC's default answers
  // pings more often than every 5 minutes with GOAWAY "too_many_pings").
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Memory (issue 18): each stream's receive window stays at kStreamWindowBytes instead of
  // growing with gRPC's bandwidth-delay probe, so what connected workers send ahead of their
  // session's reader (while the event writer's queue is full) is at most about streams x window
  // (64 workers: 4 MiB). With the probe, xvd's VmHWM grew with the stream's length (docs/
  // operations.md § Memory).
  builder->AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  builder->AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, kStreamWindowBytes);
  // A request protobuf cannot parse (invalid UTF-8 in a string field) is INVALID_ARGUMENT saying
  // why, not INTERNAL without a message.
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<UnparsableRequestInterceptorFactory>());
  interceptors.push_back(
      std::make_unique<AuditInterceptorFactory>(store_.get(), authorizer_.get()));
  builder->experimental().SetInterceptorCreators(std::move(interceptors));
  builder->RegisterService(experiments_.get());
  builder->RegisterService(campaigns_.get());
  builder->RegisterService(workers_.get());
  builder->RegisterService(plans_.get());
  builder->RegisterService(tokens_.get());
  builder->RegisterService(audit_.get());
}

Status DaemonServer::StartGrpcServer(const DaemonOptions& options, const ListenAddress& tcp) {
  grpc::ServerBuilder builder;
  int bound_port = 0;
  if (tcp.enabled) {
    std::shared_ptr<grpc::ServerCredentials> credentials;
    XV_RETURN_IF_ERROR(TcpCredentials(options, &credentials));
    builder.AddListeningPort(tcp.ToString(), credentials, &bound_port);
  }
  ConfigureServerBuilder(options, &builder);
  server_ = builder.BuildAndStart();
  if (!server_) {
    return Status::Unavailable("cannot start the gRPC server" +
                               (tcp.enabled ? " on " + tcp.ToString() : std::string()) +
                               " (address in use?)");
  }
  if (tcp.enabled && bound_port == 0) {
    server_->Shutdown();
    return Status::Unavailable("--listen " + tcp.ToString() + ": cannot bind (address in use?)");
  }
  // The unix socket: accepted here, each connection's uid recorded, then served by gRPC.
  Status us = UnixSocketAcceptor::Start(socket_path_, server_.get(), &unix_peers_, &unix_acceptor_);
  if (!us.ok()) {
    server_->Shutdown();
    return us;
  }
  if (tcp.enabled) {
    tcp_port_ = bound_port;
    port_file_ = options.state_dir + "/xvd.port";
    WritePortFile(port_file_, bound_port);
  }
  return Status::Ok();
}

Status DaemonServer::StartDashboard(const DaemonOptions& options, const ListenAddress& http) {
  // Read-only connections of its own: a page never holds the writer's connection.
  XV_RETURN_IF_ERROR(web::DashboardReader::Open(DatabasePath(options), &dashboard_reader_));
  store::Store* st = store_.get();
  dashboard_router_ = std::make_unique<web::DashboardRouter>(
      dashboard_reader_.get(), [st] { return st->database().WriteFault(); });
  dashboard_router_->SetHealthCheck(health_.get());
  Status hs = web::DashboardServer::Start(http.host, http.port, /*threads=*/2,
                                          dashboard_router_.get(), &dashboard_);
  if (!hs.ok()) {
    unix_acceptor_->Stop();
    server_->Shutdown();
    return hs;
  }
  http_port_ = dashboard_->port();
  http_port_file_ = options.state_dir + "/http.port";
  WritePortFile(http_port_file_, http_port_);
  spdlog::info("dashboard on http://{}:{}/ (read-only; /metrics)", http.host, http_port_);
  return Status::Ok();
}

Status DaemonServer::StartHealthListener(const DaemonOptions& options) {
  if (options.health_listen == "off" || options.health_listen == "none") return Status::Ok();
  const std::string& text = options.health_listen;
  const size_t colon = text.rfind(':');
  const std::string host = colon == std::string::npos ? "" : text.substr(0, colon);
  const std::string port = colon == std::string::npos ? "" : text.substr(colon + 1);
  if (host.empty() || port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string::npos || std::stoi(port) > 65535) {
    server_->Shutdown();
    return Status::InvalidArgument("--health-listen '" + text +
                                   "': expected HOST:PORT (0.0.0.0:8471, [::]:8471) or off");
  }
  Status hs = web::DashboardServer::Start(host, std::stoi(port), /*threads=*/1, health_.get(),
                                          &health_server_, "--health-listen");
  if (!hs.ok()) {
    server_->Shutdown();
    return hs;
  }
  health_port_ = health_server_->port();
  health_port_file_ = options.state_dir + "/health.port";
  WritePortFile(health_port_file_, health_port_);
  spdlog::info("health endpoints on http://{}:{}/healthz and /readyz", host, health_port_);
  return Status::Ok();
}

DaemonServer::~DaemonServer() { Shutdown(); }

void DaemonServer::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  if (health_) health_->SetServing(false);  // /readyz turns 503 before anything stops
  // The periodic work first (it schedules into sessions), then the sessions: their handlers block
  // on reads until cancelled.
  if (loop_) loop_->Stop();
  if (dispatcher_) dispatcher_->Stop();
  if (watch_hub_) watch_hub_->Stop();          // open Watch streams end
  if (unix_acceptor_) unix_acceptor_->Stop();  // no new connection reaches a stopping server
  // The long-lived calls (sessions, watches) were ended above. gRPC (1.51) sends an idle
  // connection no GOAWAY until the deadline passes, so a long grace made every exit with a client
  // still connected take all of it (3 s). A handler running at the deadline still finishes (Wait
  // below); only its reply is cancelled, and nothing is acknowledged before it is committed.
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
  if (server_) server_->Wait();
  if (event_writer_) event_writer_->Stop();  // the sessions' last events are stored by now
  if (health_server_) health_server_->Stop();
  health_server_.reset();
  if (!health_port_file_.empty()) ::unlink(health_port_file_.c_str());
  if (dashboard_) dashboard_->Stop();  // before the store closes: pages read it
  dashboard_.reset();
  dashboard_router_.reset();
  dashboard_reader_.reset();
  if (!http_port_file_.empty()) ::unlink(http_port_file_.c_str());
  if (!socket_path_.empty()) ::unlink(socket_path_.c_str());
  if (!port_file_.empty()) ::unlink(port_file_.c_str());
  store_.reset();  // closes the database (checkpoints the WAL)
}

}  // namespace xv::daemon
