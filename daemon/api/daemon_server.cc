#include "daemon/api/daemon_server.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include <grpcpp/resource_quota.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <spdlog/spdlog.h>

#include "daemon/api/listen_address.h"
#include "daemon/api/state_dir_lock.h"
#include "daemon/api/state_dir_permissions.h"
#include "daemon/api/unparsable_request_interceptor.h"

#ifndef XV_VERSION
#define XV_VERSION "dev"
#endif

namespace xv::daemon {

Status DaemonServer::Start(const DaemonOptions& options, std::unique_ptr<DaemonServer>* out) {
  if (options.state_dir.empty()) return Status::InvalidArgument("--state-dir: required");
  ListenAddress tcp;
  XV_RETURN_IF_ERROR(ParseListenAddress(options.listen, &tcp));
  ListenAddress http;
  if (options.http != "off") XV_RETURN_IF_ERROR(ParseListenAddress(options.http, "--http", &http));
  std::error_code ec;
  std::filesystem::create_directories(options.state_dir, ec);
  if (ec) return Status::IoError(options.state_dir + ": cannot create: " + ec.message());
  XV_RETURN_IF_ERROR(RestrictStateDirPermissions(options.state_dir));

  std::unique_ptr<DaemonServer> d(new DaemonServer());
  const std::string db_path = options.state_dir + "/xv.db";
  XV_RETURN_IF_ERROR(store::Store::Open(db_path, &d->store_));
  XV_RETURN_IF_ERROR(RestrictDatabaseFilePermissions(db_path));
  spdlog::info("database {} (schema version {})", db_path, d->store_->database().schema_version());
  XV_RETURN_IF_ERROR(d->store_->workers().MarkAllWorkersOffline());
  {
    WatchHubOptions hub_options;
    hub_options.queue_capacity = static_cast<size_t>(options.watch_queue_capacity);
    hub_options.max_streams = static_cast<size_t>(std::max(0, options.max_watch_streams));
    d->watch_hub_ = std::make_unique<WatchHub>(d->store_.get(), hub_options);
  }
  {
    WatchHub* hub = d->watch_hub_.get();
    d->store_->database().SetCommitListener([hub] { hub->Notify(); }, options.wal_checkpoint_pages);
  }
  XV_RETURN_IF_ERROR(d->watch_hub_->Start());

  d->socket_path_ =
      options.socket_path.empty() ? options.state_dir + "/xvd.sock" : options.socket_path;
  XV_RETURN_IF_ERROR(RemoveStaleSocket(d->socket_path_));

  d->dispatcher_ = std::make_unique<Dispatcher>(d->store_.get(), options.dispatcher);
  d->closer_ = std::make_unique<RoundCloser>(d->store_.get());
  d->plan_runner_ = std::make_unique<PlanRunner>(d->store_.get(), d->dispatcher_.get(),
                                                 d->closer_.get(), options.limits);
  {
    RoundCloser* closer = d->closer_.get();
    PlanRunner* plans = d->plan_runner_.get();
    store::Store* st = d->store_.get();
    auto fault_seen = std::make_shared<std::string>();
    auto next_retry = std::make_shared<std::chrono::steady_clock::time_point>();
    d->dispatcher_->SetTickHook([closer, plans, st, options, fault_seen, next_retry] {
      Status s = closer->DecideReadyRounds(nullptr);
      if (!s.ok()) spdlog::error("deciding rounds: {}", s.ToString());
      // Plans continue from the rounds just decided (and, after a restart, where they were).
      s = plans->AdvanceAll();
      if (!s.ok()) spdlog::error("advancing plans: {}", s.ToString());
      // Read-only mode: entered when a write failed for lack of space or permission; left when
      // a retried write commits.
      const auto now = std::chrono::steady_clock::now();
      std::string fault = st->database().WriteFault();
      if (!fault.empty() && now >= *next_retry) {
        *next_retry = now + std::chrono::milliseconds(options.write_retry_ms);
        bool writable = false;
        s = st->database().RetryWrites(&writable);
        if (writable) fault.clear();
      }
      if (fault != *fault_seen) {
        if (!fault.empty()) {
          spdlog::error(
              "read-only mode: {} cannot take writes ({}); refusing new work, retrying "
              "every {} ms",
              st->database().path(), fault, options.write_retry_ms);
        } else {
          spdlog::info("read-only mode over: {} takes writes again", st->database().path());
        }
        *fault_seen = fault;
      }
      if (fault.empty()) {
        s = st->database().MaintainWal(std::chrono::milliseconds(options.wal_checkpoint_ms),
                                       std::chrono::milliseconds(options.wal_idle_ms));
        if (!s.ok()) spdlog::warn("WAL checkpoint: {}", s.ToString());
      }
    });
  }
  d->experiments_ = std::make_unique<ExperimentsService>(
      d->store_.get(), d->dispatcher_.get(), options.limits, XV_VERSION, d->closer_.get());
  d->campaigns_ = std::make_unique<CampaignsService>(d->store_.get(), d->dispatcher_.get(),
                                                     d->closer_.get(), options.limits);
  d->workers_ = std::make_unique<WorkersService>(d->store_.get(), d->dispatcher_.get());
  d->plans_ = std::make_unique<PlansService>(d->store_.get(), d->dispatcher_.get(),
                                             d->campaigns_.get(), d->plan_runner_.get());
  d->experiments_->SetWatchHub(d->watch_hub_.get());
  d->rate_limiter_ = std::make_unique<CallerRateLimiter>(options.rate_limit);
  d->experiments_->SetRateLimiter(d->rate_limiter_.get());
  d->campaigns_->SetRateLimiter(d->rate_limiter_.get());
  d->plans_->SetRateLimiter(d->rate_limiter_.get());

  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + d->socket_path_, grpc::InsecureServerCredentials());
  int bound_port = 0;
  if (tcp.enabled) {
    builder.AddListeningPort(tcp.ToString(), grpc::InsecureServerCredentials(), &bound_port);
  }
  builder.SetMaxReceiveMessageSize(options.max_message_bytes);
  // Bounded work for the synchronous methods: threads at once, calls per connection.
  grpc::ResourceQuota quota("xvd");
  quota.SetMaxThreads(options.max_rpc_threads);
  builder.SetResourceQuota(quota);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_streams_per_connection);
  // Workers send HTTP/2 keepalive pings every 10 s to notice a dead connection (a network cut)
  // within the lease; accept them even when the daemon has nothing to send (gRPC's default answers
  // pings more often than every 5 minutes with GOAWAY "too_many_pings").
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // A request protobuf cannot parse (invalid UTF-8 in a string field) is INVALID_ARGUMENT saying
  // why, not INTERNAL without a message.
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<UnparsableRequestInterceptorFactory>());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  builder.RegisterService(d->experiments_.get());
  builder.RegisterService(d->campaigns_.get());
  builder.RegisterService(d->workers_.get());
  builder.RegisterService(d->plans_.get());
  d->server_ = builder.BuildAndStart();
  if (!d->server_) {
    return Status::Unavailable("cannot listen on unix:" + d->socket_path_ +
                               (tcp.enabled ? " and " + tcp.ToString() : std::string()) +
                               " (address in use?)");
  }
  if (tcp.enabled && bound_port == 0) {
    d->server_->Shutdown();
    return Status::Unavailable("--listen " + tcp.ToString() + ": cannot bind (address in use?)");
  }
  if (::chmod(d->socket_path_.c_str(), 0660) != 0) {
    spdlog::warn("{}: cannot set permissions 0660", d->socket_path_);
  }
  if (tcp.enabled) {
    d->tcp_port_ = bound_port;
    d->port_file_ = options.state_dir + "/xvd.port";
    std::ofstream(d->port_file_) << bound_port << "\n";
  }
  if (http.enabled) {
    // Read-only connections of its own: a page never holds the writer's connection.
    XV_RETURN_IF_ERROR(web::DashboardReader::Open(db_path, &d->dashboard_reader_));
    store::Store* st = d->store_.get();
    d->dashboard_router_ = std::make_unique<web::DashboardRouter>(
        d->dashboard_reader_.get(), [st] { return st->database().WriteFault(); });
    Status hs = web::DashboardServer::Start(http.host, http.port, /*threads=*/2,
                                            d->dashboard_router_.get(), &d->dashboard_);
    if (!hs.ok()) {
      d->server_->Shutdown();
      return hs;
    }
    d->http_port_ = d->dashboard_->port();
    d->http_port_file_ = options.state_dir + "/http.port";
    std::ofstream(d->http_port_file_) << d->http_port_ << "\n";
    spdlog::info("dashboard on http://{}:{}/ (read-only; /metrics)", http.host, d->http_port_);
  }
  d->dispatcher_->Start();
  spdlog::info("xvd {} listening on unix:{}{}", XV_VERSION, d->socket_path_,
               tcp.enabled ? " and " + tcp.host + ":" + std::to_string(bound_port) : "");
  *out = std::move(d);
  return Status::Ok();
}

DaemonServer::~DaemonServer() { Shutdown(); }

void DaemonServer::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  // Sessions first: their handlers block on reads until cancelled.
  if (dispatcher_) dispatcher_->Stop();
  if (watch_hub_) watch_hub_->Stop();  // open Watch streams end
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(3));
  if (server_) server_->Wait();
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
