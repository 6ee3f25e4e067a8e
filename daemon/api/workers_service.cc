#include "daemon/api/workers_service.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "common/run_states.h"
#include "common/untrusted_text.h"
#include "daemon/api/event_batcher.h"
#include "daemon/api/worker_message_edge.h"
#include "daemon/api/worker_session.h"

namespace xv::daemon {
namespace {

constexpr std::chrono::milliseconds kFlushInterval(200);

// One message of the stream: false at its end; *error set (and false) when it does not parse.
bool ReadWorkerMessage(grpc::ServerReaderWriter<xv::v1::DaemonMessage, grpc::ByteBuffer>* stream,
                       xv::v1::WorkerMessage* msg, UnreadableWorkerMessage* unreadable,
                       Status* error) {
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
    f->set_state("failed");
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

WorkersService::WorkersService(store::Store* store, Dispatcher* dispatcher)
    : store_(store), dispatcher_(dispatcher) {
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

grpc::Status WorkersService::Session(
    grpc::ServerContext* ctx,
    grpc::ServerReaderWriter<xv::v1::DaemonMessage, grpc::ByteBuffer>* stream) {
  xv::v1::WorkerMessage first;
  UnreadableWorkerMessage unreadable;
  Status read_error;
  if (!ReadWorkerMessage(stream, &first, &unreadable, &read_error)) {
    if (read_error.ok()) return grpc::Status::OK;
    spdlog::warn("worker session from {} refused: {}", ctx->peer(), read_error.message());
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, read_error.message());
  }
  if (!first.has_register_()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "session: the first message must be Register");
  }
  // The worker edge (worker_message_edge.h): checked and bounded before anything is stored.
  xv::v1::Register& reg = *first.mutable_register_();
  std::vector<std::string> notes;
  Status s = CheckRegister(&reg, &notes);
  if (!s.ok()) {
    spdlog::warn("worker registration from {} refused: {}", ctx->peer(), s.message());
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, s.message());
  }
  for (const std::string& note : notes) {
    spdlog::warn("worker {}: {}", QuoteExcerpt(reg.worker_name()), note);
  }
  int64_t worker_id = 0;
  s = store_->workers().UpsertWorker(reg, &worker_id);
  if (!s.ok()) return grpc::Status(grpc::StatusCode::UNAVAILABLE, s.ToString());

  auto session = std::make_shared<WorkerSession>(worker_id, reg, ctx);
  {
    xv::v1::DaemonMessage msg;
    msg.mutable_registered()->set_worker_id(worker_id);
    msg.mutable_registered()->set_heartbeat_interval_ms(
        dispatcher_->options().heartbeat_interval_ms);
    msg.mutable_registered()->set_lease_ms(dispatcher_->options().lease_ms);
    if (!stream->Write(msg)) return grpc::Status::OK;
  }
  spdlog::info("worker {} (id {}, {} {}) registered from {}", reg.worker_name(), worker_id,
               reg.device().backend(), reg.device().name(), ctx->peer());

  // Reconcile what the worker says it runs with what the store says it holds.
  grpc::Status reconcile_status = grpc::Status::OK;
  dispatcher_->Attach(session, [&] {
    std::set<std::pair<int64_t, int>> reported;
    for (const auto& ra : reg.running()) {
      reported.insert({ra.experiment_id(), ra.attempt()});
      int64_t seq = 0;
      Status rs = store_->attempts().HighestContiguousSeq(ra.experiment_id(), ra.attempt(), &seq);
      if (!rs.ok()) {
        reconcile_status = grpc::Status(grpc::StatusCode::UNAVAILABLE, rs.ToString());
        return;
      }
      // The worker replays from its spool whatever is newer than this.
      xv::v1::DaemonMessage ack;
      ack.mutable_ack()->set_experiment_id(ra.experiment_id());
      ack.mutable_ack()->set_attempt(ra.attempt());
      ack.mutable_ack()->set_seq(seq);
      session->Push(std::move(ack));
      // Still running: kept when active, reclaimed when it was lost and its requeue is still
      // queued, else cancelled.
      if (!ra.finished())
        dispatcher_->ReclaimRunningAttempt(session, ra.experiment_id(), ra.attempt());
    }
    // Attempts the store gives this worker that it does not report are gone with its old process.
    std::vector<store::ActiveAttempt> active;
    Status rs = store_->experiments().ListActive(&active);
    if (!rs.ok()) {
      reconcile_status = grpc::Status(grpc::StatusCode::UNAVAILABLE, rs.ToString());
      return;
    }
    for (const auto& a : active) {
      if (a.worker_id != worker_id || reported.count({a.experiment_id, a.attempt})) continue;
      bool requeued = false;
      rs = store_->attempts().MarkAttemptLost(
          a.experiment_id, a.attempt, "worker " + reg.worker_name() + " re-registered without it",
          dispatcher_->options().max_attempts, &requeued);
      if (!rs.ok()) spdlog::error("reconcile: {}", rs.ToString());
    }
  });
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
  EventBatcher batcher(store_, session);
  std::thread writer([&] {
    auto next_flush = std::chrono::steady_clock::now() + kFlushInterval;
    while (true) {
      xv::v1::DaemonMessage msg;
      auto now = std::chrono::steady_clock::now();
      auto wait = next_flush > now
                      ? std::chrono::duration_cast<std::chrono::milliseconds>(next_flush - now)
                      : std::chrono::milliseconds(0);
      if (session->Pop(&msg, wait)) {
        if (!stream->Write(msg)) {
          session->Close();
          break;
        }
        continue;
      }
      if (session->closed()) break;
      if (std::chrono::steady_clock::now() >= next_flush) {
        batcher.Flush();
        next_flush = std::chrono::steady_clock::now() + kFlushInterval;
      }
    }
  });
  dispatcher_->Schedule();

  xv::v1::WorkerMessage msg;
  std::string protocol_error;  // set: the session ends with INVALID_ARGUMENT saying this
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
    dispatcher_->Touch(worker_id);
    switch (msg.msg_case()) {
      case xv::v1::WorkerMessage::kHeartbeat:
        if (msg.heartbeat().running_size() > kMaxRunningAttempts) {
          protocol_error = "heartbeat.running: " + std::to_string(msg.heartbeat().running_size()) +
                           " entries, over the limit of " + std::to_string(kMaxRunningAttempts);
          break;
        }
        s = store_->workers().TouchWorker(worker_id);
        if (!s.ok()) spdlog::warn("worker {}: heartbeat: {}", reg.worker_name(), s.ToString());
        dispatcher_->ReconcileHeartbeat(worker_id, msg.heartbeat());
        break;
      case xv::v1::WorkerMessage::kEvent:
        for (const std::string& note : RepairTrainerEvent(msg.mutable_event())) {
          spdlog::warn("worker {}: experiment {} attempt {}: {}", reg.worker_name(),
                       msg.event().experiment_id(), msg.event().attempt(), note);
        }
        batcher.Add(msg.event());
        break;
      case xv::v1::WorkerMessage::kFinished: {
        for (const std::string& note : RepairFinished(msg.mutable_finished())) {
          spdlog::warn("worker {}: experiment {} attempt {}: {}", reg.worker_name(),
                       msg.finished().experiment_id(), msg.finished().attempt(), note);
        }
        if (!batcher.Flush()) break;  // unacknowledged: the worker sends it again
        xv::v1::DaemonMessage ack;
        s = store_->attempts().FinishAttempt(worker_id, msg.finished(), ack.mutable_ack());
        if (!s.ok()) {
          spdlog::warn("worker {}: finished {}/{}: {}", reg.worker_name(),
                       msg.finished().experiment_id(), msg.finished().attempt(), s.ToString());
          if (s.code() != Status::Code::kFailedPrecondition) break;
          // Not this worker's attempt: acknowledge so it stops resending.
          ack.mutable_ack()->set_experiment_id(msg.finished().experiment_id());
          ack.mutable_ack()->set_attempt(msg.finished().attempt());
          ack.mutable_ack()->set_finished(true);
        } else {
          spdlog::info("experiment {} attempt {} finished on {}: {}",
                       msg.finished().experiment_id(), msg.finished().attempt(), reg.worker_name(),
                       msg.finished().state());
        }
        session->Push(std::move(ack));
        dispatcher_->Schedule();
        break;
      }
      case xv::v1::WorkerMessage::kRegister:
        spdlog::warn("worker {}: Register in the middle of a session ignored", reg.worker_name());
        break;
      default:
        break;
    }
  }
  batcher.Flush();
  dispatcher_->Detach(session);
  session->Close(/*cancel_rpc=*/false);
  writer.join();
  if (!dispatcher_->IsConnected(worker_id)) {
    s = store_->workers().SetWorkerState(worker_id, WorkerState::kOffline);
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
