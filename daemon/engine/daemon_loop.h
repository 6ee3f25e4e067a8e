// DaemonLoop: the daemon's periodic work, one Tick() every tick_ms on a thread of its own:
// expire the leases of silent workers, schedule queued experiments, decide the rounds that are
// ready, advance the plans, retry writes while the database refuses them (read-only mode), and
// keep the WAL small. Each step logs its own errors; a failed step never stops the ones after it
// and the next tick retries.
//
// Thread-safety: Start/Stop from one controlling thread. Tick() may be called from any thread
// (tests call it directly); calls are serialised. The store, dispatcher, closer and plan runner
// must outlive the loop.
#pragma once

#include <chrono>
#include <condition_variable>
#include <string>
#include <thread>

#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "daemon/engine/dispatcher.h"
#include "daemon/engine/plan_runner.h"
#include "daemon/engine/round_closer.h"
#include "daemon/store/store.h"

namespace xv::daemon {

struct DaemonLoopOptions {
  int tick_ms = 250;  // lease checks, a scheduling pass and the rest this often
  // While the database refuses writes (read-only mode), a write is retried this often.
  int write_retry_ms = 5000;
  // WAL upkeep: a PASSIVE checkpoint this often, a TRUNCATE one after this long without commits.
  int wal_checkpoint_ms = 60000;
  int wal_idle_ms = 10000;
};

class DaemonLoop {
 public:
  DaemonLoop(store::Store* store, Dispatcher* dispatcher, RoundCloser* closer, PlanRunner* plans,
             DaemonLoopOptions options);
  ~DaemonLoop();  // Stop()s

  // Starts the thread that runs Tick() every tick_ms. Call at most once.
  void Start();
  // Ends the thread after its current tick. Idempotent; Start() is not allowed after it.
  void Stop();

  // One pass of the periodic work, in this order (each step one private function).
  void Tick();

  // The write fault the loop last reported ("" while the database takes writes).
  std::string reported_write_fault() const;

 private:
  void Run();

  // The steps of Tick().
  void ExpireLeases();
  void ScheduleQueued();
  void DecideReadyRounds();
  void AdvancePlans();
  // Read-only mode: entered when a write failed for lack of space or permission; left when a
  // retried write commits. Returns the fault ("" when writable) after the retry.
  std::string RetryWritesWhileReadOnly() EXCLUSIVE_LOCKS_REQUIRED(tick_mu_);
  void ReportWriteFaultChange(const std::string& fault) EXCLUSIVE_LOCKS_REQUIRED(tick_mu_);
  void MaintainWal();

  store::Store* const store_;
  Dispatcher* const dispatcher_;
  RoundCloser* const closer_;
  PlanRunner* const plans_;
  const DaemonLoopOptions options_;

  // Serialises Tick(); the state below carries over from one tick to the next.
  mutable Mutex tick_mu_;
  std::string fault_seen_ GUARDED_BY(tick_mu_);  // the write fault last logged
  std::chrono::steady_clock::time_point next_write_retry_ GUARDED_BY(tick_mu_);

  Mutex stop_mu_;
  bool stopping_ GUARDED_BY(stop_mu_) = false;
  std::condition_variable_any stop_cv_;
  std::thread thread_;
};

}  // namespace xv::daemon
