// WorkerSession: the worker's life with the daemon. It dials xvd, registers (device fingerprint,
// capabilities, attempts still held), holds the Session stream (a reader on the connection thread,
// a writer thread sending heartbeats every heartbeat_interval_ms and the outbox in order), runs
// each Assign on an executor thread through AttemptRunner, and reconnects with exponential backoff
// and jitter (worker/reconnect_backoff.h) when the daemon goes away. A running trainer is never
// stopped by a lost connection; its events wait in the EventOutbox, spooled to disk
// (worker/event_spool.h) under <work dir>/spool. At start, Run loads the spool a previous worker
// process left: finished attempts are reported in Register.running and their events and Finished
// replayed after Registered, from the seq the daemon acknowledges for them; attempts whose trainer
// was still running are orphans: their leftover processes are killed, they are not reported (the
// daemon marks them lost and requeues them per its attempt limit), and their events are replayed.
//
// Thread-safety: Run is called once; RequestStop may be called from any thread (a signal watcher).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include <grpcpp/grpcpp.h>

#include "common/status.h"
#include "worker/attempt_runner.h"
#include "worker/event_outbox.h"
#include "xv/v1/workers.grpc.pb.h"

namespace xv::worker {

struct WorkerOptions {
  std::string daemon_address;  // "unix:/path/xvd.sock" or "host:port"
  std::string name;            // stable per device
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

  // Runs until RequestStop() or until a Drain from the daemon has been honoured. On stop, a running
  // attempt is cancelled (TERM, then KILL) and its Finished is delivered and acknowledged if the
  // daemon is reachable within stop_flush_s (else it stays in the spool for the next start).
  // Fails (before any connection) only when the spool directory cannot be opened or read.
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
  void WriterLoop(grpc::ClientReaderWriter<v1::WorkerMessage, v1::DaemonMessage>* stream,
                  std::atomic<bool>* stream_alive, int heartbeat_ms);
  void ExecutorLoop();
  void HandleDaemonMessage(const v1::DaemonMessage& msg);
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

  mutable std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  std::deque<v1::ExperimentSpec> assignments_;
  bool executor_done_ = false;
  int64_t running_experiment_ = 0;
  int32_t running_attempt_ = 0;
  int64_t running_seq_ = 0;
  grpc::ClientContext* live_context_ = nullptr;  // the current stream's context, for TryCancel
  // Attempts listed in the last Register whose first EventAck has not arrived yet.
  std::set<std::pair<int64_t, int32_t>> awaiting_first_ack_;
};

}  // namespace xv::worker
