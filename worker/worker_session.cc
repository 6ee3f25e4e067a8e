#include "worker/worker_session.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "common/interrupted_attempt.h"
#include "common/sha256.h"
#include "common/steady_clock_time.h"
#include "common/text_file.h"
#include "common/untrusted_text.h"
#include "worker/message_text_repair.h"
#include "worker/orphan_trainer.h"
#include "worker/reconnect_backoff.h"

namespace xv::worker {
namespace {

using Clock = std::chrono::steady_clock;
using Stream = grpc::ClientReaderWriter<v1::WorkerMessage, v1::DaemonMessage>;

// Register.probe_json limit of xvd (daemon/api/workers_service.cc).
constexpr size_t kMaxProbeJsonBytes = 64 * 1024;

// The cancel that ended `fin` came from this worker's stop, not from xvd: the attempt is
// interrupted, and xvd requeues it (common/interrupted_attempt.h).
void ReportInterruptedByStop(v1::Finished* fin) {
  spdlog::info(
      "experiment {} attempt {}: stopped with the worker; reported interrupted (xvd "
      "requeues it while it has attempts left)",
      fin->experiment_id(), fin->attempt());
  fin->set_state(kInterruptedFinishedState);
  fin->set_failure_kind(kWorkerStoppedFailureKind);
  fin->set_failure_detail("the worker was stopped (a stop signal) while the trainer ran; " +
                          fin->failure_detail());
}

}  // namespace

WorkerSession::WorkerSession(WorkerOptions options, v1::Device device,
                             v1::Capabilities capabilities, ProcessLauncher* launcher)
    : options_(std::move(options)),
      device_(std::move(device)),
      capabilities_(std::move(capabilities)),
      runner_(options_.trainer, launcher) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  // A connection that silently died (a network cut: no FIN, no RST) is noticed by an HTTP/2 ping
  // every 10 s that is not answered within 5 s; the stream then fails and the worker reconnects.
  // xvd accepts pings this often (daemon/api/daemon_server.cc).
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  args.SetMaxReceiveMessageSize(64 << 20);
  Status cs = OpenDaemonChannel(options_.daemon_address, options_.security, args, &channel_);
  if (!cs.ok()) {
    // main.cc checks the files first; a file that vanished since is logged at each attempt.
    spdlog::error("{}", cs.message());
    channel_ = grpc::CreateCustomChannel(options_.daemon_address,
                                         grpc::InsecureChannelCredentials(), args);
  }
  stub_ = v1::Workers::NewStub(channel_);
}

WorkerSession::~WorkerSession() = default;

void WorkerSession::RequestStop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
    stopped_experiment_ = running_experiment_;
    stopped_attempt_ = running_attempt_;
  }
  runner_.Cancel(0, 0);
  cv_.notify_all();
}

std::vector<v1::RunningAttempt> WorkerSession::CurrentAttempts() const {
  std::vector<v1::RunningAttempt> held = outbox_.HeldAttempts();
  MutexLock lock(&mu_);
  if (running_experiment_ != 0) {
    const int64_t experiment = running_experiment_;
    const int32_t attempt = running_attempt_;
    auto it = std::find_if(held.begin(), held.end(), [&](const v1::RunningAttempt& a) {
      return a.experiment_id() == experiment && a.attempt() == attempt;
    });
    if (it == held.end()) {
      v1::RunningAttempt ra;
      ra.set_experiment_id(running_experiment_);
      ra.set_attempt(running_attempt_);
      held.push_back(ra);
      it = held.end() - 1;
    }
    it->set_last_seq(std::max(it->last_seq(), running_seq_));
    it->set_finished(false);
  }
  return held;
}

Status WorkerSession::RecoverSpool() {
  std::string dir = options_.spool_dir;
  if (dir.empty()) {
    if (options_.trainer.work_dir.empty()) return Status::Ok();  // memory only
    dir = options_.trainer.work_dir + "/spool";
  }
  std::unique_ptr<EventSpool> spool;
  XV_RETURN_IF_ERROR(EventSpool::Open(dir, &spool));
  std::vector<SpooledAttempt> recovered;
  XV_RETURN_IF_ERROR(outbox_.AttachSpool(std::move(spool), &recovered));
  // Trainers still running from a previous worker process (the spool's lock says no other worker
  // uses this work dir) can never be read again: they go before any new work arrives.
  int killed = 0;
  if (!options_.trainer.work_dir.empty()) {
    killed = KillOrphanedTrainers(options_.trainer.work_dir, /*wait_s=*/10);
  }
  for (const SpooledAttempt& a : recovered) {
    const size_t events = a.messages.size() - (a.finished ? 1 : 0);
    if (a.finished) {
      spdlog::info(
          "spool: experiment {} attempt {} finished under a previous worker process; its "
          "Finished and {} unacknowledged event(s) are replayed after registering",
          a.experiment_id, a.attempt, events);
      continue;
    }
    spdlog::warn(
        "spool: experiment {} attempt {} was running when a previous worker process ended; it "
        "is not reported as running, so the daemon marks it lost and requeues it per its "
        "attempt limit; {} unacknowledged event(s) are replayed",
        a.experiment_id, a.attempt, events);
    outbox_.MarkAbandoned(a.experiment_id, a.attempt);
  }
  if (killed > 0) spdlog::warn("spool: {} orphaned trainer process(es) killed", killed);
  return Status::Ok();
}

Status WorkerSession::Run() {
  XV_RETURN_IF_ERROR(RecoverSpool());
  std::thread executor([this] { ExecutorLoop(); });
  std::thread connection([this] { ConnectionLoop(); });
  {
    MutexLock lock(&mu_);
    cv_.wait(mu_, [&] { return stop_.load(); });
  }
  spdlog::info("stopping: cancelling any running attempt");
  runner_.Cancel(0, 0);
  cv_.notify_all();
  executor.join();
  const auto t0 = Clock::now();
  // Sent is not stored: wait for the daemon's acknowledgements (a drained worker's last Finished
  // must land before the session is cancelled), bounded by stop_flush_s.
  while (outbox_.held() > 0 && connected_ && SecondsSince(t0) < options_.stop_flush_s) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (outbox_.held() > 0) {
    spdlog::warn("stopping with {} unacknowledged messages (kept in the spool for the next start)",
                 outbox_.held());
  }
  shutdown_ = true;
  {
    MutexLock lock(&mu_);
    if (live_context_) live_context_->TryCancel();
  }
  outbox_.Wake();
  cv_.notify_all();
  connection.join();
  return Status::Ok();
}

void WorkerSession::ExecutorLoop() {
  while (true) {
    v1::ExperimentSpec spec;
    {
      MutexLock lock(&mu_);
      cv_.wait(mu_, [&] {
        mu_.AssertHeld();
        return stop_ || !assignments_.empty();
      });
      if (stop_) break;
      spec = assignments_.front();
      assignments_.pop_front();
      running_experiment_ = spec.experiment_id();
      running_attempt_ = spec.attempt();
      running_seq_ = 0;
    }
    v1::Finished fin = runner_.Run(spec, [this](const v1::TrainerEvent& ev) {
      v1::WorkerMessage m;
      *m.mutable_event() = ev;
      {
        MutexLock lock(&mu_);
        running_seq_ = ev.seq();
      }
      outbox_.Push(m);
    });
    {
      MutexLock lock(&mu_);
      if (fin.experiment_id() == stopped_experiment_ && fin.attempt() == stopped_attempt_ &&
          fin.state() == "cancelled") {
        ReportInterruptedByStop(&fin);
      }
    }
    v1::WorkerMessage m;
    *m.mutable_finished() = fin;
    outbox_.Push(m);
    ++attempts_finished_;
    bool drained = false;
    {
      MutexLock lock(&mu_);
      running_experiment_ = 0;
      running_attempt_ = 0;
      running_seq_ = 0;
      drained = draining_ && assignments_.empty();
    }
    if (drained) {
      spdlog::info("drain: the last attempt finished; stopping");
      RequestStop();
    }
  }
  MutexLock lock(&mu_);
  executor_done_ = true;
}

void WorkerSession::ConnectionLoop() {
  ReconnectBackoff backoff(options_.initial_backoff_s, options_.max_backoff_s);
  while (!shutdown_) {
    bool registered = RunOneConnection();
    if (shutdown_) break;
    if (registered) backoff.Reset();
    const double delay = backoff.NextDelaySeconds();
    spdlog::info("reconnecting to {} in {:.2f} s ({} message(s) held for the daemon)",
                 options_.daemon_address, delay, outbox_.held());
    MutexLock lock(&mu_);
    cv_.wait_for(mu_, std::chrono::duration<double>(delay), [&] { return shutdown_.load(); });
  }
}

namespace {

// xvd stores a source of at most this many bytes (daemon/store/source_table.h kMaxSourceBytes).
constexpr int64_t kMaxRegisteredSourceBytes = 512 * 1024;

// The configured source of every trainer that runs code candidates: the base of the patches
// submitted for it (issue 16). Read at each Register, so an edited file is the new base after a
// reconnect; a file that cannot be sent is left out with a warning.
void AddTrainerSources(const std::vector<TrainerConfig>& trainers, v1::Register* reg) {
  for (const TrainerConfig& t : trainers) {
    if (!t.allow_code_candidates) continue;
    std::string text;
    Status s = ReadRegularFile(t.source, kMaxRegisteredSourceBytes, &text);
    if (s.ok() && !IsValidUtf8(text)) s = Status::InvalidArgument("not valid UTF-8");
    if (!s.ok()) {
      spdlog::warn("trainer '{}': source {} not registered (patches cannot be applied to it): {}",
                   t.name, t.source, s.message());
      continue;
    }
    v1::TrainerSource* source = reg->add_trainer_sources();
    source->set_trainer(t.name);
    source->set_sha256(Sha256Hex(text));
    source->set_text(std::move(text));
  }
}

}  // namespace

v1::WorkerMessage WorkerSession::BuildRegister() const {
  v1::WorkerMessage reg_msg;
  v1::Register* reg = reg_msg.mutable_register_();
  reg->set_worker_name(options_.name);
  *reg->mutable_device() = device_;
  *reg->mutable_capabilities() = capabilities_;
  reg->set_version(options_.version);
  // xvd refuses a probe over 64 KiB (and with it the whole Register): register without it.
  if (options_.probe_json.size() <= kMaxProbeJsonBytes) {
    reg->set_probe_json(options_.probe_json);
  } else {
    spdlog::warn("probe output of {} bytes is over xvd's limit of {}; registering without it",
                 options_.probe_json.size(), kMaxProbeJsonBytes);
  }
  for (const auto& ra : CurrentAttempts()) *reg->add_running() = ra;
  AddTrainerSources(options_.trainer.trainers, reg);
  // Device names, knobs and probe text come from the trainer and the machine: valid UTF-8 only.
  for (const std::string& field : RepairMessageText(&reg_msg)) {
    spdlog::warn("register: invalid UTF-8 in {} replaced by U+FFFD", field);
  }
  return reg_msg;
}

bool WorkerSession::RunOneConnection() {
  grpc::ClientContext ctx;
  {
    MutexLock lock(&mu_);
    if (shutdown_) return false;
    live_context_ = &ctx;
  }
  struct ClearContext {
    WorkerSession* s;
    ~ClearContext() {
      MutexLock lock(&s->mu_);
      s->live_context_ = nullptr;
    }
  } clear{this};

  std::unique_ptr<Stream> stream = stub_->Session(&ctx);
  const v1::WorkerMessage reg_msg = BuildRegister();
  const v1::Register* reg = &reg_msg.register_();
  {
    MutexLock lock(&mu_);
    awaiting_first_ack_.clear();
    for (const auto& ra : reg->running())
      awaiting_first_ack_.insert({ra.experiment_id(), ra.attempt()});
  }

  v1::DaemonMessage first;
  if (!stream->Write(reg_msg) || !stream->Read(&first)) {
    grpc::Status st = stream->Finish();
    if (st.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
        st.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
      spdlog::error("xvd at {} refused this worker: {} (check --token-file / XV_TOKEN_FILE)",
                    options_.daemon_address, st.error_message());
      return false;
    }
    spdlog::warn("cannot reach xvd at {}: {}", options_.daemon_address,
                 st.ok() ? "stream closed" : st.error_message());
    return false;
  }
  if (!first.has_registered()) {
    spdlog::error("xvd answered Register with something other than Registered; reconnecting");
    ctx.TryCancel();
    stream->Finish();
    return false;
  }
  worker_id_ = first.registered().worker_id();
  int heartbeat_ms = first.registered().heartbeat_interval_ms();
  if (heartbeat_ms <= 0) heartbeat_ms = 2000;
  spdlog::info("registered with xvd at {} as worker {} ({}), heartbeat every {} ms",
               options_.daemon_address, worker_id_.load(), options_.name, heartbeat_ms);
  connected_ = true;
  outbox_.ResendUnacked();

  std::atomic<bool> stream_alive{true};
  const bool event_batches = first.registered().accepts_event_batches();
  std::thread writer([&] { WriterLoop(stream.get(), &stream_alive, heartbeat_ms, event_batches); });
  v1::DaemonMessage msg;
  while (stream->Read(&msg)) HandleDaemonMessage(msg);
  connected_ = false;
  stream_alive = false;
  ctx.TryCancel();
  outbox_.Wake();
  writer.join();
  grpc::Status st = stream->Finish();
  if (!shutdown_) {
    spdlog::warn("session with xvd ended: {}",
                 st.ok() ? "closed by the daemon" : st.error_message());
  }
  return true;
}

void WorkerSession::WriterLoop(Stream* stream, std::atomic<bool>* stream_alive, int heartbeat_ms,
                               bool event_batches) {
  {
    // The daemon answers Register with an EventAck for every attempt listed: replaying starts
    // after those arrive, from the seq they carry (a daemon that sends none costs this wait).
    MutexLock lock(&mu_);
    cv_.wait_for(mu_, std::chrono::duration<double>(options_.first_ack_wait_s), [&] {
      mu_.AssertHeld();
      return awaiting_first_ack_.empty() || !*stream_alive || shutdown_;
    });
  }
  auto next_heartbeat = Clock::now();
  while (*stream_alive && !shutdown_) {
    if (Clock::now() >= next_heartbeat) {
      v1::WorkerMessage hb;
      for (const auto& ra : CurrentAttempts()) *hb.mutable_heartbeat()->add_running() = ra;
      if (!hb.has_heartbeat()) hb.mutable_heartbeat();
      if (!stream->Write(hb)) break;
      next_heartbeat = Clock::now() + std::chrono::milliseconds(heartbeat_ms);
    }
    auto wait =
        std::chrono::duration_cast<std::chrono::milliseconds>(next_heartbeat - Clock::now());
    v1::WorkerMessage m;
    if (outbox_.NextToSend(&m, std::max(wait, std::chrono::milliseconds(1)),
                           event_batches ? kMaxEventsPerBatch : 1)) {
      if (!stream->Write(m)) {
        // It may not have arrived: send it again after the reconnect.
        outbox_.ResendUnacked();
        break;
      }
    }
  }
}

void WorkerSession::HandleDaemonMessage(const v1::DaemonMessage& msg) {
  switch (msg.msg_case()) {
    case v1::DaemonMessage::kAssign:
      OnAssign(msg.assign().spec());
      break;
    case v1::DaemonMessage::kCancel:
      OnCancel(msg.cancel());
      break;
    case v1::DaemonMessage::kAck:
      OnAck(msg.ack());
      break;
    case v1::DaemonMessage::kDrain:
      OnDrain(msg.drain());
      break;
    case v1::DaemonMessage::kRegistered:
      worker_id_ = msg.registered().worker_id();
      break;
    default:
      break;
  }
}

void WorkerSession::OnAssign(const v1::ExperimentSpec& spec) {
  spdlog::info("assigned experiment {} attempt {} (budget {:.0f} s, deadline {:.0f} s)",
               spec.experiment_id(), spec.attempt(), spec.time_budget_s(), spec.hard_deadline_s());
  {
    MutexLock lock(&mu_);
    bool duplicate =
        (running_experiment_ == spec.experiment_id() && running_attempt_ == spec.attempt());
    for (const auto& q : assignments_) {
      duplicate |= q.experiment_id() == spec.experiment_id() && q.attempt() == spec.attempt();
    }
    if (duplicate) {
      spdlog::info("experiment {} attempt {} is already here; ignoring the repeated Assign",
                   spec.experiment_id(), spec.attempt());
      return;
    }
    if (running_experiment_ != 0 || !assignments_.empty()) {
      spdlog::warn("busy: experiment {} attempt {} waits for the running one", spec.experiment_id(),
                   spec.attempt());
    }
    assignments_.push_back(spec);
  }
  cv_.notify_all();
}

void WorkerSession::OnCancel(const v1::Cancel& c) {
  spdlog::info("cancel experiment {} attempt {}: {}", c.experiment_id(), c.attempt(), c.reason());
  bool was_queued = false;
  {
    MutexLock lock(&mu_);
    for (auto it = assignments_.begin(); it != assignments_.end(); ++it) {
      if (it->experiment_id() == c.experiment_id() &&
          (c.attempt() == 0 || it->attempt() == c.attempt())) {
        v1::WorkerMessage m;
        auto* fin = m.mutable_finished();
        fin->set_experiment_id(it->experiment_id());
        fin->set_attempt(it->attempt());
        fin->set_exit_code(-1);
        fin->set_state("cancelled");
        fin->set_failure_kind("cancelled");
        fin->set_failure_detail("cancelled before it started");
        outbox_.Push(m);
        assignments_.erase(it);
        was_queued = true;
        break;
      }
    }
  }
  if (!was_queued) runner_.Cancel(c.experiment_id(), c.attempt());
}

void WorkerSession::OnAck(const v1::EventAck& a) {
  outbox_.Ack(a.experiment_id(), a.attempt(), a.seq(), a.finished());
  {
    MutexLock lock(&mu_);
    awaiting_first_ack_.erase({a.experiment_id(), a.attempt()});
  }
  cv_.notify_all();
}

void WorkerSession::OnDrain(const v1::Drain& drain) {
  spdlog::info("drain requested: {}", drain.reason());
  bool idle;
  {
    MutexLock lock(&mu_);
    draining_ = true;
    idle = running_experiment_ == 0 && assignments_.empty();
  }
  if (idle) RequestStop();
}

}  // namespace xv::worker
