// Dispatcher: connects the store, the placement policy and the connected workers. It assigns queued
// experiments to free workers and pushes the Assign messages, forwards cancels, and checks the
// leases: attempts whose worker stays silent longer than the lease are lost. DaemonLoop
// (daemon_loop.h) calls CheckLeases and Schedule every tick; what may make work placeable (a
// Submit, a Finished, a new session, a resumed campaign) calls RequestSchedule, which wakes the
// pass thread at once (issue 18: a freed worker does not wait for a tick, and the requests of many
// workers finishing together are served by one pass, not one serialised pass each).
//
// Cost of a pass: the connected workers, the active attempts (one per busy slot) and the head of
// the queue (a few experiments per free slot; the wider window only while free slots are left
// that the head could not fill), never the whole queue or table.
//
// Thread-safety: every public method is safe to call concurrently; scheduling passes are serialised
// by schedule_mu_, the session map is guarded by mu_. The store outlives the dispatcher.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "daemon/engine/connected_worker.h"
#include "daemon/sched/lease_table.h"
#include "daemon/sched/placement.h"
#include "daemon/store/store.h"

namespace xv::daemon {

struct DispatcherOptions {
  int heartbeat_interval_ms = 2000;
  int lease_ms = 15000;  // no contact for this long: the worker's attempts are lost
  // A lost attempt is requeued while attempt < max_attempts; 0 = each campaign's own
  // max_attempts (default 2, `campaign create --max-attempts`).
  int max_attempts = 0;
};

class Dispatcher {
 public:
  Dispatcher(store::Store* store, DispatcherOptions options);
  ~Dispatcher();  // Stop()s

  const DispatcherOptions& options() const { return options_; }

  // Starts the pass thread: from then on RequestSchedule() wakes it instead of running the pass in
  // the caller. Call at most once; Stop() ends it.
  void StartPassThread();
  // Closes every session and ends the pass thread; later passes and attaches do nothing.
  // Idempotent.
  void Stop();

  // A worker registered: runs `reconcile` (which compares the attempts the store gives this worker
  // with those the worker reports) while no scheduling pass is in flight, then attaches the
  // session, replacing (closing) any earlier session of the same worker. Without the exclusion, a
  // pass could push an Assign into the old session after `reconcile` looked and the attempt would
  // be orphaned.
  void Attach(const std::shared_ptr<ConnectedWorker>& session,
              const std::function<void()>& reconcile = nullptr);
  // The session ended; no-op when a newer session of the worker replaced it.
  void Detach(const std::shared_ptr<ConnectedWorker>& session);
  // Any message from the worker renews its lease. A worker heard from again after its lease
  // lapsed gets no new work until its next heartbeat was reconciled (ReconcileHeartbeat): an
  // attempt it still runs may be reclaimed, and the requeue of that attempt must not be assigned
  // back to it first.
  void Touch(int64_t worker_id);
  bool IsConnected(int64_t worker_id) const;
  // The trainer names a connected worker offers ({"libtorch"} when it listed none; empty when it
  // is not connected).
  std::vector<std::string> TrainersOf(int64_t worker_id) const;

  // One scheduling pass now, in the caller: assigns queued experiments to connected workers with
  // free slots and pushes the Assign messages. Errors are logged; the next pass retries.
  void Schedule();
  // Work may have become placeable: a pass as soon as possible. With the pass thread started, wakes
  // it and returns at once (requests made while a pass runs are folded into the one pass after
  // it); without it (tests that drive the dispatcher by hand), runs Schedule() in the caller.
  void RequestSchedule();
  // Tells the worker holding (experiment, attempt) to stop it.
  void SendCancel(int64_t worker_id, int64_t experiment_id, int attempt, const std::string& reason);
  // A heartbeat lists the attempts the worker holds. An attempt the store gives this worker that
  // the heartbeat does not list, assigned more than one lease ago, is lost (the Assign never
  // reached the trainer, or the worker dropped it): requeued per policy. A listed attempt with its
  // trainer still running that the store does not give this worker goes through
  // ReclaimRunningAttempt.
  void ReconcileHeartbeat(int64_t worker_id, const xv::v1::Heartbeat& heartbeat);
  // The worker `session` reports that it still runs (experiment, attempt) and the store does not
  // give it to that worker as active: Store::ReclaimLostAttempt decides; a reclaimed
  // attempt is logged, a refused one is cancelled on the worker. Call with no scheduling pass in
  // flight (under Attach's reconcile, or from ReconcileHeartbeat) so that the requeue cannot be
  // assigned in between. A store error is logged and leaves the trainer running (the next
  // heartbeat retries).
  void ReclaimRunningAttempt(const std::shared_ptr<ConnectedWorker>& session, int64_t experiment_id,
                             int attempt);
  // One lease pass at `now`: attempts whose worker's lease lapsed become lost (requeued per
  // policy).
  void CheckLeases(sched::LeaseTable::Clock::time_point now);

  // Drain: the worker named `worker` (its name, or its id as text), or every connected worker when
  // `all`, is sent Drain (finish the running attempt, take no new work, exit) and given no new
  // work from now on. *told receives their ids. NotFound for an unknown worker,
  // FailedPrecondition for one that is not connected (or, with all, when none is).
  Status Drain(const std::string& worker, bool all, const std::string& reason,
               std::vector<int64_t>* told);
  // Where a worker is in a drain: draining from Drain until its session ends, drained after.
  enum class DrainProgress { kNone, kDraining, kDrained };
  DrainProgress DrainState(int64_t worker_id) const;
  // A worker registered. Running no attempt it is a fresh process (at most replaying finished
  // ones): a finished drain is forgotten and it takes work again. Still running one in the middle
  // of a drain (it reconnected), it is told to drain again.
  void OnRegistered(const std::shared_ptr<ConnectedWorker>& session, bool holds_attempts);

 private:
  std::shared_ptr<ConnectedWorker> SessionOf(int64_t worker_id) const;
  // The pass thread: one Schedule() per wake, requests made meanwhile folded into the next.
  void RunPasses();
  // Schedule()'s steps. The open sessions that may take work (not draining, not returning, lease
  // current).
  std::vector<std::shared_ptr<ConnectedWorker>> SchedulableSessions();
  // Plans the pass from the head of the queue: a window of a few experiments per free slot, widened
  // once while slots are left free and the window was full. False (logged) on a store error.
  bool PlanFromQueueHead(const std::vector<sched::WorkerSlot>& slots, size_t free_slots,
                         const std::vector<store::ActiveAttempt>& active,
                         std::vector<sched::Placement>* placements)
      EXCLUSIVE_LOCKS_REQUIRED(schedule_mu_);

  store::Store* const store_;
  const DispatcherOptions options_;
  sched::LeaseTable leases_;

  // Lock order: schedule_mu_ (a whole pass) before mu_ (the maps below, held briefly).
  Mutex schedule_mu_;  // serialises Schedule(), CheckLeases(), Attach, Drain and reconciles
  mutable Mutex mu_ ACQUIRED_AFTER(schedule_mu_);
  std::map<int64_t, std::shared_ptr<ConnectedWorker>> sessions_ GUARDED_BY(mu_);  // by worker id
  // worker id -> its session ended (drained)
  std::map<int64_t, bool> drains_ GUARDED_BY(mu_);
  std::map<int64_t, std::string> drain_reasons_ GUARDED_BY(mu_);
  // Workers heard from after their lease lapsed whose next heartbeat is not reconciled yet: no
  // new work for them meanwhile (see Touch).
  std::set<int64_t> returning_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;

  // The pass thread and its wake-ups (a leaf lock: nothing else is taken under it).
  Mutex wake_mu_;
  std::condition_variable_any wake_cv_;
  bool pass_requested_ GUARDED_BY(wake_mu_) = false;
  bool passes_stopping_ GUARDED_BY(wake_mu_) = false;
  std::atomic<bool> pass_thread_started_{false};
  std::thread pass_thread_;
};

}  // namespace xv::daemon
