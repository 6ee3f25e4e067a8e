#include "daemon/engine/daemon_loop.h"

#include <spdlog/spdlog.h>

namespace xv::daemon {

DaemonLoop::DaemonLoop(store::Store* store, Dispatcher* dispatcher, RoundCloser* closer,
                       PlanRunner* plans, DaemonLoopOptions options)
    : store_(store), dispatcher_(dispatcher), closer_(closer), plans_(plans), options_(options) {}

DaemonLoop::~DaemonLoop() { Stop(); }

void DaemonLoop::Start() {
  thread_ = std::thread([this] { Run(); });
}

void DaemonLoop::Stop() {
  {
    MutexLock lock(&stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void DaemonLoop::Run() {
  while (true) {
    {
      MutexLock lock(&stop_mu_);
      stop_cv_.wait_for(stop_mu_, std::chrono::milliseconds(options_.tick_ms), [this] {
        stop_mu_.AssertHeld();
        return stopping_;
      });
      if (stopping_) return;
    }
    Tick();
  }
}

void DaemonLoop::Tick() {
  MutexLock lock(&tick_mu_);
  ExpireLeases();
  ScheduleQueued();
  DecideReadyRounds();
  // Plans continue from the rounds just decided (and, after a restart, where they were).
  AdvancePlans();
  const std::string fault = RetryWritesWhileReadOnly();
  ReportWriteFaultChange(fault);
  if (fault.empty()) MaintainWal();
}

std::string DaemonLoop::reported_write_fault() const {
  MutexLock lock(&tick_mu_);
  return fault_seen_;
}

void DaemonLoop::ExpireLeases() { dispatcher_->CheckLeases(sched::LeaseTable::Clock::now()); }

void DaemonLoop::ScheduleQueued() { dispatcher_->Schedule(); }

void DaemonLoop::DecideReadyRounds() {
  Status s = closer_->DecideReadyRounds(nullptr);
  if (!s.ok()) spdlog::error("deciding rounds: {}", s.ToString());
}

void DaemonLoop::AdvancePlans() {
  Status s = plans_->AdvanceAll();
  if (!s.ok()) spdlog::error("advancing plans: {}", s.ToString());
}

std::string DaemonLoop::RetryWritesWhileReadOnly() {
  std::string fault = store_->database().WriteFault();
  const auto now = std::chrono::steady_clock::now();
  if (fault.empty() || now < next_write_retry_) return fault;
  next_write_retry_ = now + std::chrono::milliseconds(options_.write_retry_ms);
  bool writable = false;
  Status s = store_->database().RetryWrites(&writable);
  // A retry that fails leaves the database read-only; the next one is write_retry_ms away.
  if (!s.ok()) spdlog::debug("retrying writes: {}", s.ToString());
  if (writable) fault.clear();
  return fault;
}

void DaemonLoop::ReportWriteFaultChange(const std::string& fault) {
  if (fault == fault_seen_) return;
  if (!fault.empty()) {
    spdlog::error(
        "read-only mode: {} cannot take writes ({}); refusing new work, retrying every {} ms",
        store_->database().path(), fault, options_.write_retry_ms);
  } else {
    spdlog::info("read-only mode over: {} takes writes again", store_->database().path());
  }
  fault_seen_ = fault;
}

void DaemonLoop::MaintainWal() {
  Status s = store_->database().MaintainWal(std::chrono::milliseconds(options_.wal_checkpoint_ms),
                                            std::chrono::milliseconds(options_.wal_idle_ms));
  if (!s.ok()) spdlog::warn("WAL checkpoint: {}", s.ToString());
}

}  // namespace xv::daemon
