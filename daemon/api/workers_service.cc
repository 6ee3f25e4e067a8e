#include "daemon/api/workers_service.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "common/interrupted_attempt.h"
#include "common/run_states.h"
#include "common/untrusted_text.h"
#include "daemon/api/worker_message_edge.h"
#include "daemon/engine/connected_worker.h"
#include "daemon/engine/event_writer.h"

namespace xv::daemon {
namespace {

// How long the outbox writer waits for a message before it checks whether the session closed.
constexpr std::chrono::milliseconds kOutboxPollInterval(200);

// One message of the stream: false at its end; *error set (and false) when it does not parse.
bool ReadWorkerMessage(WorkersService::Stream* stream, xv::v1::WorkerMessage* msg,
                       UnreadableWorkerMessage* unreadable, Status* error) {
  *error = Status::Ok();
  grpc::ByteBuffer buffer;
  if (!stream->Read(&buffer)) return false;
  std::vector<grpc::Slice> slices;
  std::string wire;
  if (buffer.Dump(&slices).ok()) {
    for (const grpc::Slice& slice : slices) {
      wire.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
    }
  }
  msg->Clear();
  *error = ParseWorkerMessage(wire, msg, unreadable);
  return error->ok();
}

// What stands in for a message that could not be read, so its attempt is not left waiting:
// a Finished becomes a failed one saying why, an event a `refused` event under its seq.
xv::v1::WorkerMessage StandInForUnreadable(const UnreadableWorkerMessage& u, const Status& why) {
  xv::v1::WorkerMessage m;
  const std::string reason = "xvd could not read this message of the worker: " + why.message();
  if (u.kind == UnreadableWorkerMessage::Kind::kFinished) {
    xv::v1::Finished* f = m.mutable_finished();
    f->set_experiment_id(u.experiment_id);
    f->set_attempt(u.attempt);
    f->set_exit_code(-1);
    f->set_state(std::string(ToString(ExperimentState::kFailed)));
    f->set_failure_kind("crashed");
    f->set_failure_detail("the worker's Finished report was unreadable (" + reason +
                          "); its state, detail and tail are lost");
  } else {
    xv::v1::TrainerEvent* ev = m.mutable_event();
    ev->set_experiment_id(u.experiment_id);
    ev->set_attempt(u.attempt);
    ev->set_seq(u.seq);
    ev->set_type("refused");
    ev->set_json(nlohmann::json({{"type", "refused"}, {"reason", reason}}).dump());
  }
  return m;
}

}  // namespace

WorkersService::WorkersService(store::Store* store, Dispatcher* dispatcher,
                               EventWriter* event_writer)
    : store_(store), dispatcher_(dispatcher), event_writer_(event_writer) {
  AddMethod(new grpc::internal::RpcServiceMethod(
      "/xv.v1.Workers/Session", grpc::internal::RpcMethod::BIDI_STREAMING,
      new grpc::internal::BidiStreamingHandler<WorkersService, grpc::ByteBuffer,
                                               xv::v1::DaemonMessage>(
          [](WorkersService* service, grpc::ServerContext* ctx,
             grpc::ServerReaderWriter<xv::v1::DaemonMessage, grpc::ByteBuffer>* stream) {
            return service->Session(ctx, stream);
          },
          this)));
}

grpc::Status WorkersService::Session(grpc::ServerContext* ctx, Stream* stream) {
  Caller caller;
  if (grpc::Status denied = AuthorizeCall(authorizer_, *ctx, "/xv.v1.Workers/Session", &caller);
      !denied.ok()) {
    return denied;
  }
  xv::v1::Register reg;
  int64_t worker_id = 0;
  grpc::Status status = RegisterWorker(ctx, caller, stream, &reg, &worker_id);
  if (!status.ok() || worker_id == 0) return status;
  auto session = std::make_shared<ConnectedWorker>(worker_id, reg, [ctx] { ctx->TryCancel(); });
  if (!stream->Write(RegisteredMessage(worker_id))) return grpc::Status::OK;
  spdlog::info("worker {} (id {}, {} {}) registered from {}", reg.worker_name(), worker_id,
               reg.device().backend(), reg.device().name(), ctx->peer());
  status = AttachWorker(reg, session);
  if (!status.ok()) return status;

  std::thread writer([&] { WriteOutbox(stream, session.get()); });
  dispatcher_->RequestSchedule();
  const std::string protocol_error = ServeMessages(stream, reg, session);
  // What failed to store was not acknowledged: the worker sends it again when it reconnects.
  if (!event_writer_->Flush(*session)) {
    spdlog::warn("worker {}: some events were not stored (not acknowledged)", reg.worker_name());
  }
  dispatcher_->Detach(session);
  session->Close(/*cancel_rpc=*/false);
  writer.join();
  event_writer_->Forget(*session);
  return EndSession(reg, worker_id, protocol_error);
}

grpc::Status WorkersService::RegisterWorker(grpc::ServerContext* ctx, const Caller& caller,
                                            Stream* stream, xv::v1::Register* reg,
                                            int64_t* worker_id) {
  *worker_id = 0;
  xv::v1::WorkerMessage first;
  UnreadableWorkerMessage unreadable;
  Status read_error;
  if (!ReadWorkerMessage(stream, &first, &unreadable, &read_error)) {
    if (read_error.ok()) return grpc::Status::OK;  // closed before registering
    spdlog::warn("worker session from {} refused: {}", ctx->peer(), read_error.message());
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, read_error.message());
  }
  if (!first.has_register_()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "session: the first message must be Register");
  }
  // The worker edge (worker_message_edge.h): checked and bounded before anything is stored.
  *reg = std::move(*first.mutable_register_());
  std::vector<std::string> notes;
  Status s = CheckRegister(reg, &notes);
  if (!s.ok()) {
    spdlog::warn("worker registration from {} refused: {}", ctx->peer(), s.message());
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, s.message());
  }
  for (const std::string& note : notes) {
    spdlog::warn("worker {}: {}", QuoteExcerpt(reg->worker_name()), note);
  }
  if (authorizer_ != nullptr) {
    grpc::Status owned = authorizer_->CheckWorkerName(caller, reg->worker_name());
    if (!owned.ok()) {
      spdlog::warn("worker registration from {} refused: {}", ctx->peer(), owned.error_message());
      return owned;  // the audit interceptor records the refusal
    }
  }
  // Before the worker shows as registered: a patch submitted once it does finds its base.
  RecordTrainerSources(*reg);
  s = store_->workers().UpsertWorker(*reg, worker_id);
  if (!s.ok()) return grpc::Status(grpc::StatusCode::UNAVAILABLE, s.ToString());
  store::AuditRow row;
  row.token_id = caller.token_id;
  row.caller = caller.Label();
  row.peer = ctx->peer();
  row.method = "/xv.v1.Workers/Session";
  row.target = "worker " + reg->worker_name();
  row.outcome = "ok";
  if (Status as = store_->audit().Append(row); !as.ok()) spdlog::warn("audit: {}", as.ToString());
  return grpc::Status::OK;
}

void WorkersService::RecordTrainerSources(const xv::v1::Register& reg) {
  for (const xv::v1::TrainerSource& source : reg.trainer_sources()) {
    Status s = store_->sources().RecordTrainerSource(source.trainer(), reg.worker_name(),
                                                     source.sha256(), source.text());
    if (!s.ok()) {
      // The worker runs as before; only patches against this trainer's source cannot be built.
      spdlog::warn("worker {}: trainer {}'s source not recorded: {}",
                   QuoteExcerpt(reg.worker_name()), QuoteExcerpt(source.trainer()), s.message());
    }
  }
}

xv::v1::DaemonMessage WorkersService::RegisteredMessage(int64_t worker_id) const {
  xv::v1::DaemonMessage msg;
  msg.mutable_registered()->set_worker_id(worker_id);
  msg.mutable_registered()->set_heartbeat_interval_ms(dispatcher_->options().heartbeat_interval_ms);
  msg.mutable_registered()->set_lease_ms(dispatcher_->options().lease_ms);
  msg.mutable_registered()->set_accepts_event_batches(true);
  return msg;
}

grpc::Status WorkersService::AttachWorker(const xv::v1::Register& reg,
                                          const std::shared_ptr<ConnectedWorker>& session) {
  grpc::Status reconcile_status = grpc::Status::OK;
  dispatcher_->Attach(session, [&] { reconcile_status = ReconcileReportedAttempts(reg, session); });
  if (!reconcile_status.ok()) {
    dispatcher_->Detach(session);
    session->Close(/*cancel_rpc=*/false);
    return reconcile_status;
  }
  // Only an attempt still running marks a reconnect in the middle of a drain; a restarted worker
  // may replay attempts that finished under its previous process.
  bool holds_running = false;
  for (const auto& ra : reg.running()) holds_running |= !ra.finished();
  dispatcher_->OnRegistered(session, holds_running);
  return grpc::Status::OK;
}

grpc::Status WorkersService::ReconcileReportedAttempts(
    const xv::v1::Register& reg, const std::shared_ptr<ConnectedWorker>& session) {
  const int64_t worker_id = session->worker_id();
  std::set<std::pair<int64_t, int>> reported;
  for (const auto& ra : reg.running()) {
    reported.insert({ra.experiment_id(), ra.attempt()});
    int64_t seq = 0;
    Status rs = store_->attempts().HighestContiguousSeq(ra.experiment_id(), ra.attempt(), &seq);
    if (!rs.ok()) return grpc::Status(grpc::StatusCode::UNAVAILABLE, rs.ToString());
    // The worker replays from its spool whatever is newer than this.
    xv::v1::DaemonMessage ack;
    ack.mutable_ack()->set_experiment_id(ra.experiment_id());
    ack.mutable_ack()->set_attempt(ra.attempt());
    ack.mutable_ack()->set_seq(seq);
    session->Push(std::move(ack));
    // Still running: kept when active, reclaimed when it was lost and its requeue is still
    // queued, else cancelled.
    if (!ra.finished()) {
      dispatcher_->ReclaimRunningAttempt(session, ra.experiment_id(), ra.attempt());
    }
  }
  // Attempts the store gives this worker that it does not report are gone with its old process.
  std::vector<store::ActiveAttempt> active;
  Status rs = store_->experiments().ListActive(&active);
  if (!rs.ok()) return grpc::Status(grpc::StatusCode::UNAVAILABLE, rs.ToString());
  for (const auto& a : active) {
    if (a.worker_id != worker_id || reported.count({a.experiment_id, a.attempt})) continue;
    bool requeued = false;
    rs = store_->attempts().MarkAttemptLost(
        a.experiment_id, a.attempt, "worker " + reg.worker_name() + " re-registered without it",
        dispatcher_->options().max_attempts, &requeued);
    if (!rs.ok()) spdlog::error("reconcile: {}", rs.ToString());
  }
  return grpc::Status::OK;
}

void WorkersService::WriteOutbox(Stream* stream, ConnectedWorker* session) {
  while (true) {
    xv::v1::DaemonMessage msg;
    if (session->Pop(&msg, kOutboxPollInterval)) {
      if (!stream->Write(msg)) {
        session->Close();
        break;
      }
      continue;
    }
    if (session->closed()) break;
  }
}

std::string WorkersService::ServeMessages(Stream* stream, const xv::v1::Register& reg,
                                          const std::shared_ptr<ConnectedWorker>& session) {
  xv::v1::WorkerMessage msg;
  UnreadableWorkerMessage unreadable;
  Status read_error;
  std::string protocol_error;  // set: the session ends with INVALID_ARGUMENT saying this
  std::chrono::steady_clock::time_point last_heartbeat_stamp;  // none yet
  while (protocol_error.empty() && !session->closed()) {
    if (!ReadWorkerMessage(stream, &msg, &unreadable, &read_error)) {
      if (read_error.ok()) break;  // the worker closed the stream
      if (unreadable.kind == UnreadableWorkerMessage::Kind::kOther) {
        protocol_error = read_error.message();
        break;
      }
      spdlog::warn("worker {}: experiment {} attempt {}: {}; a stand-in takes its place",
                   reg.worker_name(), unreadable.experiment_id, unreadable.attempt,
                   read_error.message());
      msg = StandInForUnreadable(unreadable, read_error);
    }
    dispatcher_->Touch(session->worker_id());
    switch (msg.msg_case()) {
      case xv::v1::WorkerMessage::kHeartbeat:
        protocol_error =
            HandleHeartbeat(reg, session->worker_id(), msg.heartbeat(), &last_heartbeat_stamp);
        break;
      case xv::v1::WorkerMessage::kEvent:
        for (const std::string& note : RepairTrainerEvent(msg.mutable_event())) {
          spdlog::warn("worker {}: experiment {} attempt {}: {}", reg.worker_name(),
                       msg.event().experiment_id(), msg.event().attempt(), note);
        }
        if (!event_writer_->Enqueue(session, {std::move(*msg.mutable_event())})) {
          protocol_error = "the daemon is stopping";
        }
        break;
      case xv::v1::WorkerMessage::kEventBatch:
        protocol_error = QueueEventBatch(reg, session, msg.mutable_event_batch());
        break;
      case xv::v1::WorkerMessage::kFinished:
        HandleFinished(reg, session, msg.mutable_finished());
        break;
      case xv::v1::WorkerMessage::kRegister:
        spdlog::warn("worker {}: Register in the middle of a session ignored", reg.worker_name());
        break;
      default:
        break;
    }
  }
  return protocol_error;
}

std::string WorkersService::QueueEventBatch(const xv::v1::Register& reg,
                                            const std::shared_ptr<ConnectedWorker>& session,
                                            xv::v1::EventBatch* batch) {
  if (batch->events_size() > kMaxEventsPerBatch) {
    return "event_batch.events: " + std::to_string(batch->events_size()) +
           " events, over the limit of " + std::to_string(kMaxEventsPerBatch);
  }
  std::vector<xv::v1::TrainerEvent> events;
  events.reserve(batch->events_size());
  for (xv::v1::TrainerEvent& ev : *batch->mutable_events()) {
    for (const std::string& note : RepairTrainerEvent(&ev)) {
      spdlog::warn("worker {}: experiment {} attempt {}: {}", reg.worker_name(), ev.experiment_id(),
                   ev.attempt(), note);
    }
    events.push_back(std::move(ev));
  }
  if (!event_writer_->Enqueue(session, std::move(events))) return "the daemon is stopping";
  return "";
}

std::string WorkersService::HandleHeartbeat(const xv::v1::Register& reg, int64_t worker_id,
                                            const xv::v1::Heartbeat& heartbeat,
                                            std::chrono::steady_clock::time_point* last_stamp) {
  if (heartbeat.running_size() > kMaxRunningAttempts) {
    return "heartbeat.running: " + std::to_string(heartbeat.running_size()) +
           " entries, over the limit of " + std::to_string(kMaxRunningAttempts);
  }
  const auto now = std::chrono::steady_clock::now();
  if (*last_stamp == std::chrono::steady_clock::time_point() ||
      now - *last_stamp >= kHeartbeatStampInterval) {
    Status s = store_->workers().TouchWorker(worker_id);
    if (s.ok()) {
      *last_stamp = now;
    } else {
      spdlog::warn("worker {}: heartbeat: {}", reg.worker_name(), s.ToString());
    }
  }
  dispatcher_->ReconcileHeartbeat(worker_id, heartbeat);
  return "";
}

void WorkersService::HandleFinished(const xv::v1::Register& reg,
                                    const std::shared_ptr<ConnectedWorker>& session,
                                    xv::v1::Finished* finished) {
  for (const std::string& note : RepairFinished(finished)) {
    spdlog::warn("worker {}: experiment {} attempt {}: {}", reg.worker_name(),
                 finished->experiment_id(), finished->attempt(), note);
  }
  if (finished->state() == kInterruptedFinishedState) {
    // The attempt's events first; when some failed to store, the Finished stays unacknowledged
    // too and the worker sends it again after them.
    if (!event_writer_->Flush(*session)) return;
    HandleInterrupted(reg, session, *finished);
    return;
  }
  // Applied by the event writer after the events queued before it, in its next transaction; the
  // writer acknowledges it and asks the dispatcher for a pass (DaemonServer::BuildEngine). When
  // the daemon is stopping it stays unacknowledged and the worker sends it again.
  if (!event_writer_->EnqueueFinished(session, std::move(*finished))) {
    spdlog::warn("worker {}: finished report not taken: the daemon is stopping", reg.worker_name());
  }
}

void WorkersService::HandleInterrupted(const xv::v1::Register& reg,
                                       const std::shared_ptr<ConnectedWorker>& session,
                                       const xv::v1::Finished& finished) {
  const int64_t exp = finished.experiment_id();
  const int attempt = finished.attempt();
  // The worker is stopping: no new work for it (a drain), before the requeue below could hand
  // the experiment straight back to it.
  std::vector<int64_t> told;
  Status drained =
      dispatcher_->Drain(std::to_string(session->worker_id()), /*all=*/false,
                         "the worker is stopping (it reported an attempt interrupted)", &told);
  if (!drained.ok()) spdlog::warn("worker {}: {}", reg.worker_name(), drained.ToString());
  bool active = false;
  Status s = store_->attempts().IsActiveAttemptOf(session->worker_id(), exp, attempt, &active);
  bool requeued = false;
  if (s.ok() && active) {
    s = store_->attempts().MarkAttemptLost(exp, attempt,
                                           "worker " + reg.worker_name() +
                                               " was stopped while the trainer ran (" +
                                               finished.failure_detail() + ")",
                                           dispatcher_->options().max_attempts, &requeued);
  }
  if (!s.ok()) {
    // Unacknowledged: the worker sends it again (or the lease expires and the same rule applies).
    spdlog::warn("worker {}: interrupted {}/{}: {}", reg.worker_name(), exp, attempt, s.ToString());
    return;
  }
  spdlog::info("experiment {} attempt {} interrupted on {} (the worker stopped): {}", exp, attempt,
               reg.worker_name(),
               !active    ? "no longer its active attempt, nothing changes"
               : requeued ? "requeued"
                          : "out of attempts, lost");
  xv::v1::DaemonMessage ack;
  int64_t seq = 0;
  if (!store_->attempts().HighestContiguousSeq(exp, attempt, &seq).ok()) seq = 0;
  ack.mutable_ack()->set_experiment_id(exp);
  ack.mutable_ack()->set_attempt(attempt);
  ack.mutable_ack()->set_seq(seq);
  ack.mutable_ack()->set_finished(true);
  session->Push(std::move(ack));
  dispatcher_->RequestSchedule();
}

grpc::Status WorkersService::EndSession(const xv::v1::Register& reg, int64_t worker_id,
                                        const std::string& protocol_error) {
  if (!dispatcher_->IsConnected(worker_id)) {
    Status s = store_->workers().SetWorkerState(worker_id, WorkerState::kOffline);
    if (!s.ok()) spdlog::warn("worker {}: {}", reg.worker_name(), s.ToString());
  }
  if (!protocol_error.empty()) {
    spdlog::warn("worker {}: session ended on a protocol error: {}", reg.worker_name(),
                 protocol_error);
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, protocol_error);
  }
  spdlog::info("worker {} session ended", reg.worker_name());
  return grpc::Status::OK;
}

}  // namespace xv::daemon
