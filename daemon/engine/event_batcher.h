// EventBatcher: collects one session's trainer events and stores them in batches (one transaction
// per batch), pushing the resulting EventAcks to the session's outbox. Thread-safety: Add and Flush
// may be called from the reader and the writer threads concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "daemon/engine/connected_worker.h"
#include "daemon/store/store.h"

namespace xv::daemon {

class EventBatcher {
 public:
  static constexpr size_t kMaxBatch = 64;

  EventBatcher(store::Store* store, std::shared_ptr<ConnectedWorker> session);

  // Queues one event; flushes when the batch is full.
  void Add(xv::v1::TrainerEvent event);
  // Stores the pending events (if any) and pushes their acks. Returns false when the store failed;
  // the events are then dropped unacknowledged, so the worker replays them from its spool.
  bool Flush();

 private:
  store::Store* const store_;
  const std::shared_ptr<ConnectedWorker> session_;
  Mutex mu_;
  std::vector<xv::v1::TrainerEvent> pending_ GUARDED_BY(mu_);
};

}  // namespace xv::daemon
