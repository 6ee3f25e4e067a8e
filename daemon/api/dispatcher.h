// Dispatcher: connects the store, the placement policy and the connected workers. It assigns queued
// experiments to free workers and pushes the Assign messages, forwards cancels, and runs the lease
// monitor that marks attempts lost when their worker stays silent longer than the lease.
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
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "daemon/api/worker_session.h"
#include "daemon/sched/lease_table.h"
#include "daemon/store/store.h"

namespace xv::daemon {

struct DispatcherOptions {
  int heartbeat_interval_ms = 2000;
  int lease_ms = 15000;  // no contact for this long: the worker's attempts are lost
  // A lost attempt is requeued while attempt < max_attempts; 0 = each campaign's own
  // max_attempts (default 2, `campaign create --max-attempts`).
  int max_attempts = 0;
  int tick_ms = 250;  // lease checks and a scheduling pass this often
};

class Dispatcher {
 public:
  Dispatcher(store::Store* store, DispatcherOptions options);
  ~Dispatcher();  // Stop()s

  const DispatcherOptions& options() const { return options_; }

  // Runs `hook` on the monitor thread after every lease check and scheduling pass (e.g. deciding
  // finished rounds). Call before Start().
  void SetTickHook(std::function<void()> hook) { tick_hook_ = std::move(hook); }
  // Starts the lease monitor thread. Stop() ends it and closes every session.
  void Start();
  void Stop();

  // A worker registered: runs `reconcile` (which compares the attempts the store gives this worker
  // with those the worker reports) while no scheduling pass is in flight, then attaches the
  // session, replacing (closing) any earlier session of the same worker. Without the exclusion, a
  // pass could push an Assign into the old session after `reconcile` looked and the attempt would
  // be orphaned.
  void Attach(const std::shared_ptr<WorkerSession>& session,
              const std::function<void()>& reconcile = nullptr);
  // The session ended; no-op when a newer session of the worker replaced it.
  void Detach(const std::shared_ptr<WorkerSession>& session);
  // Any message from the worker renews its lease. A worker heard from again after its lease
  // lapsed gets no new work until its next heartbeat was reconciled (ReconcileHeartbeat): an
  // attempt it still runs may be reclaimed, and the requeue of that attempt must not be assigned
  // back to it first.
  void Touch(int64_t worker_id);
  bool IsConnected(int64_t worker_id) const;
  // The trainer names a connected worker offers ({"libtorch"} when it listed none; empty when it
  // is not connected).
  std::vector<std::string> TrainersOf(int64_t worker_id) const;

  // One scheduling pass: assigns queued experiments to connected workers with free slots and pushes
  // the Assign messages. Errors are logged; the next pass retries.
  void Schedule();
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
  void ReclaimRunningAttempt(const std::shared_ptr<WorkerSession>& session, int64_t experiment_id,
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
  // "draining" from Drain until the worker's session ends, "drained" after, "" otherwise.
  std::string DrainState(int64_t worker_id) const;
  // A worker registered. Running no attempt it is a fresh process (at most replaying finished
  // ones): a finished drain is forgotten and it takes work again. Still running one in the middle
  // of a drain (it reconnected), it is told to drain again.
  void OnRegistered(const std::shared_ptr<WorkerSession>& session, bool holds_attempts);

 private:
  void MonitorLoop();
  std::shared_ptr<WorkerSession> SessionOf(int64_t worker_id) const;

  store::Store* const store_;
  const DispatcherOptions options_;
  sched::LeaseTable leases_;

  mutable std::mutex mu_;
  std::map<int64_t, std::shared_ptr<WorkerSession>> sessions_;  // by worker id; guarded by mu_
  std::map<int64_t, bool> drains_;  // worker id -> its session ended (drained); guarded by mu_
  std::map<int64_t, std::string> drain_reasons_;  // guarded by mu_
  // Workers heard from after their lease lapsed whose next heartbeat is not reconciled yet: no
  // new work for them meanwhile (see Touch). Guarded by mu_.
  std::set<int64_t> returning_;
  bool stopping_ = false;  // guarded by mu_
  std::condition_variable stop_cv_;
  std::thread monitor_;
  std::function<void()> tick_hook_;  // set before Start(); read by the monitor thread only

  std::mutex schedule_mu_;  // serialises Schedule() and CheckLeases()
};

}  // namespace xv::daemon
