// WorkerSession: the worker's life with the daemon: dial xvd, register (device, capabilities,
// attempts still held), hold the Session stream (reader on the connection thread, writer thread
// for heartbeats and the outbox), run each Assign through AttemptRunner on an executor thread, and
// reconnect with backoff (worker/reconnect_backoff.h) when the daemon goes away. A lost connection
// never stops a running trainer: its events wait in the EventOutbox, spooled under
// <work dir>/spool (worker/event_spool.h). Recovery of what a previous worker process left: Run.
//
// Thread-safety: Run is called once; RequestStop may be called from any thread (a signal watcher).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include <grpcpp/grpcpp.h>

#include "common/mutex.h"
#include "common/status.h"
#include "proto/daemon_channel.h"
#include "worker/attempt_runner.h"
#include "worker/event_outbox.h"
#include "xv/v1/workers.grpc.pb.h"

namespace xv::worker {

struct WorkerOptions {
  std::string daemon_address;  // "unix:/path/xvd.sock" or "host:port"
  // The worker token and TLS files (proto/daemon_channel.h; docs/operations.md § Authentication
  // and TLS). An unreadable TLS file makes every connection attempt fail, saying which.
  DaemonChannelSecurity security;
  std::string name;  // stable per device
  TrainerInvocation trainer;
  double initial_backoff_s = 0.1;  // reconnect delays: jittered, doubling up to max_backoff_s
  double max_backoff_s = 5.0;
  // Where unacknowledged events and Finished messages are spooled; "" means
  // <trainer.work_dir>/spool (and no spool at all when the work dir is "" too).
  std::string spool_dir;
  // After a reconnect, how long the writer waits for the daemon's EventAck of each attempt listed
  // in Register.running before it replays (so the replay starts at the daemon's acked seq).
  double first_ack_wait_s = 1.0;
  // How long a stopping worker keeps waiting for the daemon to acknowledge what it still holds.
  double stop_flush_s = 3.0;
  std::string version = "0.1.0";
  std::string probe_json;  // `xv-train probe` output sent in Register ("" when not probed)
};

class WorkerSession {
 public:
  // `launcher` must outlive the session.
  WorkerSession(WorkerOptions options, v1::Device device, v1::Capabilities capabilities,
                ProcessLauncher* launcher);
  ~WorkerSession();

  // Runs until RequestStop() or until a Drain from the daemon has been honoured. First it loads the
  // spool a previous worker process left: finished attempts are reported in Register.running and
  // their events and Finished replayed after Registered, from the seq the daemon acknowledges;
  // attempts whose trainer was still running are orphans: their leftover processes are killed,
  // they are not reported (the daemon marks them lost and requeues them) and their events are
  // replayed. On stop, a running attempt is cancelled (TERM, then KILL) and reported interrupted
  // (xvd requeues it as lost with its worker; a trainer that still finishes within the grace
  // reports its own outcome); that Finished is delivered and acknowledged if the daemon is
  // reachable within stop_flush_s (else it stays in the spool for the next start). Fails (before
  // any connection) only when the spool directory cannot be opened or read.
  Status Run();
  void RequestStop();

  // For tests and logs.
  bool connected() const { return connected_; }
  int64_t worker_id() const { return worker_id_; }
  int attempts_finished() const { return attempts_finished_; }

 private:
  // Attaches the spool to the outbox and deals with what a previous worker process left there.
  Status RecoverSpool();
  void ConnectionLoop();
  // One connection: register, then read until the stream breaks. Returns true if it registered.
  bool RunOneConnection();
  // Sends heartbeats and the outbox; events go kMaxEventsPerBatch to a message when
  // `event_batches` (the daemon said Registered.accepts_event_batches), else one each.
  void WriterLoop(grpc::ClientReaderWriter<v1::WorkerMessage, v1::DaemonMessage>* stream,
                  std::atomic<bool>* stream_alive, int heartbeat_ms, bool event_batches);
  static constexpr size_t kMaxEventsPerBatch = 64;
  void ExecutorLoop();
  void HandleDaemonMessage(const v1::DaemonMessage& msg);
  void OnAssign(const v1::ExperimentSpec& spec);
  void OnCancel(const v1::Cancel& cancel);
  void OnAck(const v1::EventAck& ack);
  void OnDrain(const v1::Drain& drain);
  // The Register message: who this worker is and the attempts it still holds.
  v1::WorkerMessage BuildRegister() const;
  std::vector<v1::RunningAttempt> CurrentAttempts() const;

  const WorkerOptions options_;
  const v1::Device device_;
  const v1::Capabilities capabilities_;
  AttemptRunner runner_;
  EventOutbox outbox_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Workers::Stub> stub_;

  std::atomic<bool> stop_{false};      // RequestStop was called, or a drain completed
  std::atomic<bool> shutdown_{false};  // the connection loop must end now
  std::atomic<bool> draining_{false};
  std::atomic<bool> connected_{false};
  std::atomic<int64_t> worker_id_{0};
  std::atomic<int> attempts_finished_{0};

  // Lock order: mu_ before the outbox's lock (OnCancel pushes a Finished under mu_); mu_ is never
  // held while the runner's lock is taken (RequestStop cancels after releasing it).
  mutable Mutex mu_;
  std::condition_variable_any cv_;
  std::deque<v1::ExperimentSpec> assignments_ GUARDED_BY(mu_);
  bool executor_done_ GUARDED_BY(mu_) = false;
  int64_t running_experiment_ GUARDED_BY(mu_) = 0;
  int32_t running_attempt_ GUARDED_BY(mu_) = 0;
  int64_t running_seq_ GUARDED_BY(mu_) = 0;
  // The attempt that was running when RequestStop came (0 when none): its Finished, if the stop's
  // cancel ended it, is reported interrupted (common/interrupted_attempt.h) so that xvd requeues
  // it.
  int64_t stopped_experiment_ GUARDED_BY(mu_) = 0;
  int32_t stopped_attempt_ GUARDED_BY(mu_) = 0;
  // The current stream's context, for TryCancel.
  grpc::ClientContext* live_context_ GUARDED_BY(mu_) = nullptr;
  // Attempts listed in the last Register whose first EventAck has not arrived yet.
  std::set<std::pair<int64_t, int32_t>> awaiting_first_ack_ GUARDED_BY(mu_);
};

}  // namespace xv::worker
