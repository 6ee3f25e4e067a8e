// WorkersService: the xv.v1.Workers gRPC service. Each Session call is one worker's bidirectional
// stream (protocol in proto/xv/v1/workers.proto):
//   Register -> Registered (+ EventAck/Cancel for attempts the worker reports as running), then the
//   daemon pushes Assign/Cancel/EventAck while the worker sends Heartbeat, TrainerEvent and
//   Finished.
// Trainer events go to the daemon's one EventWriter (daemon/engine/event_writer.h), which stores
// the events of all sessions together, one transaction per batch; the EventAck then carries the
// highest contiguous seq stored. A Finished goes to the same writer after the session's events
// (applied after them in its transaction, or in a later one), so an attempt's events are always
// stored before its terminal state. Thread-safety:
// gRPC runs each Session on its own thread; the handler starts one writer thread per session (gRPC
// allows one concurrent reader and one concurrent writer per stream).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <grpcpp/impl/service_type.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/sync_stream.h>

#include "daemon/api/authorizer.h"
#include "daemon/engine/connected_worker.h"
#include "daemon/engine/dispatcher.h"
#include "daemon/engine/event_writer.h"
#include "daemon/store/store.h"
#include "xv/v1/workers.grpc.pb.h"

namespace xv::daemon {

// The service is registered by hand rather than through the generated xv::v1::Workers::Service so
// that it reads the worker's messages as raw bytes and parses them itself
// (worker_message_edge.h ParseWorkerMessage): a message that does not parse is then a protocol
// error naming the field, instead of a stream that silently ends (gRPC's own parse failure looks
// like the worker closing the stream, and the worker resent the same message forever). An
// unreadable Finished still ends its attempt (failed, with the reason); an unreadable event is
// stored as a `refused` event under its seq; anything else ends the session with INVALID_ARGUMENT.
class WorkersService final : public grpc::Service {
 public:
  // `store`, `dispatcher` and `event_writer` must outlive the service.
  WorkersService(store::Store* store, Dispatcher* dispatcher, EventWriter* event_writer);

  using Stream = grpc::ServerReaderWriter<xv::v1::DaemonMessage, grpc::ByteBuffer>;

  // Needs the worker role (a worker token, or the local owner on the unix socket); the Register's
  // worker name must be the caller's (Authorizer::CheckWorkerName): a session under another
  // worker's name is refused before it touches that worker's row or attempts.
  grpc::Status Session(grpc::ServerContext* ctx, Stream* stream);
  // Null admits every session under any name (unit tests of the service alone).
  void SetAuthorizer(const Authorizer* authorizer) { authorizer_ = authorizer; }

 private:
  // The steps of Session, in order.
  // Reads and checks Register and stores the worker; *worker_id stays 0 (with OK) when the
  // worker closed the stream before registering.
  grpc::Status RegisterWorker(grpc::ServerContext* ctx, const Caller& caller, Stream* stream,
                              xv::v1::Register* reg, int64_t* worker_id);
  // Stores the sources the worker registered for its code-candidate trainers (a patch's base;
  // issue 16). A source that cannot be stored is logged; the session goes on.
  void RecordTrainerSources(const xv::v1::Register& reg);
  xv::v1::DaemonMessage RegisteredMessage(int64_t worker_id) const;
  // Attaches the session to the dispatcher after reconciling what the worker reports it runs;
  // UNAVAILABLE (the session is closed) when the store cannot say.
  grpc::Status AttachWorker(const xv::v1::Register& reg,
                            const std::shared_ptr<ConnectedWorker>& session);
  // Runs under Dispatcher::Attach: acks the events stored for each attempt the worker reports,
  // reclaims or cancels the ones still running that it no longer holds, and loses the attempts
  // the store gives it that it does not report.
  grpc::Status ReconcileReportedAttempts(const xv::v1::Register& reg,
                                         const std::shared_ptr<ConnectedWorker>& session);
  // The writer thread: writes the outbox until the session closes.
  static void WriteOutbox(Stream* stream, ConnectedWorker* session);
  // Reads the worker's messages until it closes the stream, the session closes or a protocol
  // error (returned; "" otherwise).
  std::string ServeMessages(Stream* stream, const xv::v1::Register& reg,
                            const std::shared_ptr<ConnectedWorker>& session);
  // Repairs and queues the events of an EventBatch; a protocol error ("" when none) when it holds
  // over kMaxEventsPerBatch events or the daemon is stopping.
  std::string QueueEventBatch(const xv::v1::Register& reg,
                              const std::shared_ptr<ConnectedWorker>& session,
                              xv::v1::EventBatch* batch);
  static constexpr int kMaxEventsPerBatch = 1024;
  // Heartbeats are stored (workers.last_heartbeat) at most this often per session: every stamp
  // is a write transaction, and 64 workers beating every 2 s made 32 a second, each waiting for
  // the writer. The lease runs on every message in memory (Dispatcher::Touch), not on the stamp.
  static constexpr std::chrono::seconds kHeartbeatStampInterval{10};
  // A protocol error ("" when none). *last_stamp: when this session last stored a heartbeat
  // (updated when this one is stored).
  std::string HandleHeartbeat(const xv::v1::Register& reg, int64_t worker_id,
                              const xv::v1::Heartbeat& heartbeat,
                              std::chrono::steady_clock::time_point* last_stamp);
  // Queues the attempt's end to the event writer (EventWriter::EnqueueFinished), which stores and
  // acknowledges it after the session's events; an interrupted one waits for them here and goes
  // to HandleInterrupted.
  void HandleFinished(const xv::v1::Register& reg, const std::shared_ptr<ConnectedWorker>& session,
                      xv::v1::Finished* finished);
  // A Finished the worker sent as interrupted (it was stopped while the trainer ran;
  // common/interrupted_attempt.h): the worker is stopping, so it is drained first (given no new
  // work); when it is still this worker's active attempt, the attempt is lost with its worker
  // (requeued while the experiment has attempts left); then the Finished is acknowledged.
  void HandleInterrupted(const xv::v1::Register& reg,
                         const std::shared_ptr<ConnectedWorker>& session,
                         const xv::v1::Finished& finished);
  // Marks the worker offline unless a newer session took over; the session's final status.
  grpc::Status EndSession(const xv::v1::Register& reg, int64_t worker_id,
                          const std::string& protocol_error);

  store::Store* const store_;
  Dispatcher* const dispatcher_;
  EventWriter* const event_writer_;
  const Authorizer* authorizer_ = nullptr;
};

}  // namespace xv::daemon
