#include "daemon/engine/dispatcher.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
#include <string>
#include <utility>

#include "common/run_states.h"
#include "daemon/engine/budget_contract.h"
#include "daemon/sched/placement.h"

namespace xv::daemon {
namespace {

// The head of the queue a pass reads first: this many experiments per free slot, at least
// kHeadWindowMin. Placement is greedy in queue order, so when the head fills every free slot a
// longer window would place exactly the same experiments.
constexpr size_t kHeadWindowPerFreeSlot = 4;
constexpr size_t kHeadWindowMin = 16;
// The window read when the head left slots free (experiments no free worker can take: another
// trainer, a device filter, a campaign at its max_concurrent): wide enough to pass over them.
constexpr size_t kQueueWindow = 1024;

// For each campaign of `queued` whose budget contract sets max_concurrent: that limit minus its
// attempts in `active` (what PlanPlacements may still give it). A stored budget that no longer
// parses (validated at creation, so only a hand-edited database) leaves the campaign unlimited.

std::map<int64_t, int> CampaignFreeSlots(const std::vector<store::QueuedExperiment>& queued,
                                         const std::vector<store::ActiveAttempt>& active) {
  std::map<int64_t, int> limits;
  std::set<int64_t> seen;
  for (const store::QueuedExperiment& q : queued) {
    if (!seen.insert(q.campaign_id).second) continue;
    BudgetContract contract;
    Status s = ParseBudgetContract(q.campaign_budget_json, &contract);
    if (!s.ok()) {
      spdlog::warn("campaign {}: stored budget ignored for placement: {}", q.campaign_id,
                   s.ToString());
      continue;
    }
    if (contract.max_concurrent) limits[q.campaign_id] = *contract.max_concurrent;
  }
  for (const store::ActiveAttempt& a : active) {
    auto it = limits.find(a.campaign_id);
    if (it != limits.end()) --it->second;
  }
  return limits;
}

}  // namespace

Dispatcher::Dispatcher(store::Store* store, DispatcherOptions options)
    : store_(store),
      options_(options),
      leases_(std::chrono::milliseconds(options.lease_ms), sched::LeaseTable::Clock::now()) {}

Dispatcher::~Dispatcher() { Stop(); }

void Dispatcher::StartPassThread() {
  pass_thread_ = std::thread([this] { RunPasses(); });
  pass_thread_started_ = true;
}

void Dispatcher::Stop() {
  std::map<int64_t, std::shared_ptr<ConnectedWorker>> sessions;
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    sessions.swap(sessions_);
  }
  {
    MutexLock lock(&wake_mu_);
    passes_stopping_ = true;
  }
  wake_cv_.notify_all();
  if (pass_thread_.joinable()) pass_thread_.join();
  for (auto& [id, s] : sessions) s->Close();
}

void Dispatcher::RequestSchedule() {
  if (!pass_thread_started_) {
    Schedule();
    return;
  }
  {
    MutexLock lock(&wake_mu_);
    pass_requested_ = true;
  }
  wake_cv_.notify_one();
}

void Dispatcher::RunPasses() {
  while (true) {
    {
      MutexLock lock(&wake_mu_);
      wake_cv_.wait(wake_mu_, [this] {
        wake_mu_.AssertHeld();
        return pass_requested_ || passes_stopping_;
      });
      if (passes_stopping_) return;
      pass_requested_ = false;  // a request from here on gets a pass after this one
    }
    Schedule();
  }
}

void Dispatcher::Attach(const std::shared_ptr<ConnectedWorker>& session,
                        const std::function<void()>& reconcile) {
  MutexLock pass(&schedule_mu_);
  if (reconcile) reconcile();
  std::shared_ptr<ConnectedWorker> old;
  {
    MutexLock lock(&mu_);
    if (stopping_) {
      session->Close();
      return;
    }
    auto& slot = sessions_[session->worker_id()];
    old = slot;
    slot = session;
  }
  leases_.Touch(session->worker_id(), sched::LeaseTable::Clock::now());
  {
    // `reconcile` has seen what the re-registered worker runs.
    MutexLock lock(&mu_);
    returning_.erase(session->worker_id());
  }
  if (old && old != session) {
    spdlog::info("worker {} re-registered; closing its previous session", session->name());
    old->Close();
  }
}

void Dispatcher::Detach(const std::shared_ptr<ConnectedWorker>& session) {
  MutexLock lock(&mu_);
  auto it = sessions_.find(session->worker_id());
  if (it != sessions_.end() && it->second == session) {
    sessions_.erase(it);
    auto d = drains_.find(session->worker_id());
    if (d != drains_.end()) d->second = true;
  }
}

Status Dispatcher::Drain(const std::string& worker, bool all, const std::string& reason,
                         std::vector<int64_t>* told) {
  std::vector<std::shared_ptr<ConnectedWorker>> targets;
  {
    // No scheduling pass in flight: none can assign to a worker after it is marked draining.
    MutexLock pass(&schedule_mu_);
    MutexLock lock(&mu_);
    for (const auto& [id, s] : sessions_) {
      if (s->closed()) continue;
      if (all || s->name() == worker || std::to_string(id) == worker) targets.push_back(s);
    }
    for (const auto& s : targets) {
      drains_[s->worker_id()] = false;
      drain_reasons_[s->worker_id()] = reason;
    }
  }
  if (targets.empty()) {
    if (all) return Status::FailedPrecondition("no worker is connected");
    std::vector<xv::v1::WorkerInfo> known;
    XV_RETURN_IF_ERROR(store_->workers().ListWorkers(&known));
    for (const auto& w : known) {
      if (w.name() == worker || std::to_string(w.id()) == worker) {
        return Status::FailedPrecondition("worker '" + worker +
                                          "' is not connected (nothing to drain)");
      }
    }
    return Status::NotFound("worker '" + worker + "': no such worker (see xvctl status)");
  }
  for (const auto& s : targets) {
    Status st = store_->workers().SetWorkerState(s->worker_id(), WorkerState::kDraining);
    if (!st.ok()) spdlog::warn("drain: worker {}: {}", s->name(), st.ToString());
    xv::v1::DaemonMessage msg;
    msg.mutable_drain()->set_reason(reason);
    s->Push(std::move(msg));
    spdlog::info("worker {} draining: {}", s->name(), reason);
    told->push_back(s->worker_id());
  }
  return Status::Ok();
}

Dispatcher::DrainProgress Dispatcher::DrainState(int64_t worker_id) const {
  MutexLock lock(&mu_);
  auto it = drains_.find(worker_id);
  if (it == drains_.end()) return DrainProgress::kNone;
  return it->second ? DrainProgress::kDrained : DrainProgress::kDraining;
}

void Dispatcher::OnRegistered(const std::shared_ptr<ConnectedWorker>& session,
                              bool holds_attempts) {
  std::string reason;
  {
    MutexLock lock(&mu_);
    auto it = drains_.find(session->worker_id());
    if (it == drains_.end()) return;
    if (!holds_attempts) {
      drains_.erase(it);
      drain_reasons_.erase(session->worker_id());
      return;
    }
    it->second = false;
    reason = drain_reasons_[session->worker_id()];
  }
  xv::v1::DaemonMessage msg;
  msg.mutable_drain()->set_reason(reason);
  session->Push(std::move(msg));
}

void Dispatcher::Touch(int64_t worker_id) {
  const auto now = sched::LeaseTable::Clock::now();
  if (leases_.Expired(worker_id, now)) {
    MutexLock lock(&mu_);
    returning_.insert(worker_id);
  }
  leases_.Touch(worker_id, now);
}

bool Dispatcher::IsConnected(int64_t worker_id) const { return SessionOf(worker_id) != nullptr; }

std::vector<std::string> Dispatcher::TrainersOf(int64_t worker_id) const {
  std::shared_ptr<ConnectedWorker> session = SessionOf(worker_id);
  if (session == nullptr) return {};
  if (session->trainers().empty()) return {"libtorch"};
  return session->trainers();
}

std::shared_ptr<ConnectedWorker> Dispatcher::SessionOf(int64_t worker_id) const {
  MutexLock lock(&mu_);
  auto it = sessions_.find(worker_id);
  return it == sessions_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<ConnectedWorker>> Dispatcher::SchedulableSessions() {
  std::vector<std::shared_ptr<ConnectedWorker>> sessions;
  MutexLock lock(&mu_);
  if (stopping_) return sessions;
  // A worker whose lease lapsed (a silent stream: a network cut) gets nothing new: the attempt
  // just requeued from it would go straight back to it and be lost again.
  const auto now = sched::LeaseTable::Clock::now();
  for (auto& [id, s] : sessions_) {
    if (!s->closed() && !drains_.count(id) && !returning_.count(id) && !leases_.Expired(id, now))
      sessions.push_back(s);
  }
  return sessions;
}

void Dispatcher::Schedule() {
  MutexLock pass(&schedule_mu_);
  const std::vector<std::shared_ptr<ConnectedWorker>> sessions = SchedulableSessions();
  if (sessions.empty()) return;
  // Read-only mode (the database refuses writes): no new assignments until writes work again.
  if (!store_->database().WriteFault().empty()) return;
  // Free slots first: a pass with every worker busy reads nothing of the queue.
  std::vector<store::ActiveAttempt> active;
  Status s = store_->experiments().ListActive(&active);
  if (!s.ok()) {
    spdlog::error("scheduling: {}", s.ToString());
    return;
  }
  std::map<int64_t, int> busy;
  for (const auto& a : active) ++busy[a.worker_id];
  std::vector<sched::WorkerSlot> slots;
  std::map<int64_t, std::shared_ptr<ConnectedWorker>> by_id;
  size_t free_slots = 0;
  for (const auto& session : sessions) {
    sched::WorkerSlot slot;
    slot.worker_id = session->worker_id();
    slot.trainers = session->trainers();
    slot.code_candidate_trainers = session->code_candidate_trainers();
    slot.has_gpu = session->has_gpu();
    slot.device_text = session->device_text();
    slot.free_slots = session->max_concurrent() - busy[session->worker_id()];
    if (slot.free_slots > 0) {
      slots.push_back(slot);
      free_slots += static_cast<size_t>(slot.free_slots);
    }
    by_id[session->worker_id()] = session;
  }
  if (slots.empty()) return;
  std::vector<sched::Placement> placements;
  if (!PlanFromQueueHead(slots, free_slots, active, &placements)) return;
  // One transaction (one commit) for the pass's assignments.
  std::vector<store::AttemptLedger::Assignment> assignments;
  for (const sched::Placement& p : placements)
    assignments.push_back({p.experiment_id, p.worker_id});
  std::vector<xv::v1::ExperimentSpec> specs;
  std::vector<Status> assigned;
  s = store_->attempts().AssignExperiments(assignments, &specs, &assigned);
  if (!s.ok()) {
    spdlog::warn("assigning {} experiment(s): {}", assignments.size(), s.ToString());
    return;
  }
  for (size_t i = 0; i < placements.size(); ++i) {
    const sched::Placement& p = placements[i];
    if (!assigned[i].ok()) {
      spdlog::warn("assign experiment {}: {}", p.experiment_id, assigned[i].ToString());
      continue;
    }
    xv::v1::DaemonMessage msg;
    *msg.mutable_assign()->mutable_spec() = std::move(specs[i]);
    const auto& session = by_id[p.worker_id];
    spdlog::info("experiment {} attempt {} -> worker {}", p.experiment_id,
                 msg.assign().spec().attempt(), session->name());
    // If the session closed meanwhile, the attempt stays assigned and the lease reclaims it.
    session->Push(std::move(msg));
  }
}

bool Dispatcher::PlanFromQueueHead(const std::vector<sched::WorkerSlot>& slots, size_t free_slots,
                                   const std::vector<store::ActiveAttempt>& active,
                                   std::vector<sched::Placement>* placements) {
  const size_t head = std::max(kHeadWindowMin, kHeadWindowPerFreeSlot * free_slots);
  for (const size_t window : {head, std::max(kQueueWindow, 64 * free_slots)}) {
    std::vector<store::QueuedExperiment> queued;
    Status s = store_->experiments().ListQueued(&queued, window);
    if (!s.ok()) {
      spdlog::error("scheduling: {}", s.ToString());
      return false;
    }
    // Earlier attempts of the candidates in this window only: placement asks about no other.
    std::set<std::pair<int64_t, std::string>> candidates;
    for (const auto& q : queued) candidates.emplace(q.round_id, q.candidate);
    std::vector<store::CandidateWorkerCount> history;
    s = store_->experiments().CountCandidateAttempts(candidates, &history);
    if (!s.ok()) {
      spdlog::error("scheduling: {}", s.ToString());
      return false;
    }
    *placements = sched::PlanPlacements(queued, slots, history, CampaignFreeSlots(queued, active));
    // Every slot filled, or the whole queue read: a wider window would place the same.
    if (placements->size() >= free_slots || queued.size() < window) return true;
  }
  return true;
}

void Dispatcher::SendCancel(int64_t worker_id, int64_t experiment_id, int attempt,
                            const std::string& reason) {
  auto session = SessionOf(worker_id);
  if (!session) return;
  xv::v1::DaemonMessage msg;
  msg.mutable_cancel()->set_experiment_id(experiment_id);
  msg.mutable_cancel()->set_attempt(attempt);
  msg.mutable_cancel()->set_reason(reason);
  session->Push(std::move(msg));
}

void Dispatcher::CheckLeases(sched::LeaseTable::Clock::time_point now) {
  std::vector<store::ActiveAttempt> active;
  {
    MutexLock pass(&schedule_mu_);
    Status s = store_->experiments().ListActive(&active);
    if (!s.ok()) {
      spdlog::error("lease check: {}", s.ToString());
      return;
    }
    for (const auto& a : active) {
      if (!leases_.Expired(a.worker_id, now)) continue;
      bool requeued = false;
      std::string detail = "no contact from worker " + std::to_string(a.worker_id) + " within " +
                           std::to_string(options_.lease_ms) + " ms";
      s = store_->attempts().MarkAttemptLost(a.experiment_id, a.attempt, detail,
                                             options_.max_attempts, &requeued);
      if (!s.ok()) {
        spdlog::error("lease check: experiment {}: {}", a.experiment_id, s.ToString());
        continue;
      }
      spdlog::warn("experiment {} attempt {} lost ({}){}", a.experiment_id, a.attempt, detail,
                   requeued ? "; requeued" : "");
      // No Cancel now: a silent worker that comes back with the trainer still running lists the
      // attempt in its next heartbeat, and ReclaimRunningAttempt then reclaims it (the requeue
      // still queued) or cancels it.
    }
  }
}

void Dispatcher::ReclaimRunningAttempt(const std::shared_ptr<ConnectedWorker>& session,
                                       int64_t experiment_id, int attempt) {
  // The common case (a reconnect while the attempt is still held) is a read, not a transaction.
  bool active = false;
  Status s =
      store_->attempts().IsActiveAttemptOf(session->worker_id(), experiment_id, attempt, &active);
  if (s.ok() && active) return;
  store::ReclaimDecision decision;
  if (s.ok()) {
    s = store_->attempts().ReclaimLostAttempt(session->worker_id(), experiment_id, attempt,
                                              &decision);
  }
  if (!s.ok()) {
    spdlog::error("worker {}: experiment {} attempt {}: reclaim: {}", session->name(),
                  experiment_id, attempt, s.ToString());
    return;
  }
  switch (decision.outcome) {
    case store::ReclaimDecision::Outcome::kActive:
      return;
    case store::ReclaimDecision::Outcome::kReclaimed:
      spdlog::warn("experiment {} attempt {} reclaimed ({}): {}", experiment_id, attempt,
                   ToString(decision.state), decision.reason);
      return;
    case store::ReclaimDecision::Outcome::kRefused: {
      spdlog::info("worker {}: cancelling experiment {} attempt {}: {}", session->name(),
                   experiment_id, attempt, decision.reason);
      xv::v1::DaemonMessage msg;
      msg.mutable_cancel()->set_experiment_id(experiment_id);
      msg.mutable_cancel()->set_attempt(attempt);
      msg.mutable_cancel()->set_reason("the daemon no longer holds this attempt for this worker: " +
                                       decision.reason);
      session->Push(std::move(msg));
      return;
    }
  }
}

void Dispatcher::ReconcileHeartbeat(int64_t worker_id, const xv::v1::Heartbeat& heartbeat) {
  MutexLock pass(&schedule_mu_);
  // Whatever happens below, the worker's heartbeat has been looked at: it may take work again.
  struct EndReturn {
    Dispatcher* d;
    int64_t id;
    ~EndReturn() {
      MutexLock lock(&d->mu_);
      d->returning_.erase(id);
    }
  } end_return{this, worker_id};
  std::vector<store::ActiveAttempt> active;
  Status s = store_->experiments().ListActive(&active);
  if (!s.ok()) {
    spdlog::error("heartbeat reconcile: {}", s.ToString());
    return;
  }
  // Attempts it runs that the store does not give it (lost during a silence, or not its own).
  if (std::shared_ptr<ConnectedWorker> session = SessionOf(worker_id)) {
    for (const auto& ra : heartbeat.running()) {
      if (ra.finished()) continue;  // its Finished is on its way
      const bool held = std::any_of(active.begin(), active.end(), [&](const auto& a) {
        return a.worker_id == worker_id && a.experiment_id == ra.experiment_id() &&
               a.attempt == ra.attempt();
      });
      if (!held) ReclaimRunningAttempt(session, ra.experiment_id(), ra.attempt());
    }
  }
  for (const auto& a : active) {
    if (a.worker_id != worker_id || a.assigned_age_ms <= options_.lease_ms) continue;
    bool listed = false;
    for (const auto& ra : heartbeat.running()) {
      listed |= ra.experiment_id() == a.experiment_id && ra.attempt() == a.attempt;
    }
    if (listed) continue;
    bool requeued = false;
    const std::string detail =
        "worker " + std::to_string(worker_id) + " does not report it in its heartbeats";
    s = store_->attempts().MarkAttemptLost(a.experiment_id, a.attempt, detail,
                                           options_.max_attempts, &requeued);
    if (!s.ok()) {
      spdlog::error("heartbeat reconcile: experiment {}: {}", a.experiment_id, s.ToString());
      continue;
    }
    spdlog::warn("experiment {} attempt {} lost ({}){}", a.experiment_id, a.attempt, detail,
                 requeued ? "; requeued" : "");
  }
}

}  // namespace xv::daemon
