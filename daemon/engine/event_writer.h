// EventWriter: the one writer of trainer events for every worker session (group commit). A
// session's reader thread queues the events it reads (Enqueue); one thread takes everything queued,
// from all sessions at once, stores it in ONE transaction (AttemptLedger::ApplyTrainerEventBatches:
// one fsync for the events of many workers), and each session is pushed the EventAcks of its
// events.
// While a transaction commits, the next one's events gather in the queue, so the batch grows with
// the load and an event waits at most about two transactions, never a timer.
//
// The session's thread reads each event's JSON as it queues it (store::ReadStepEventAhead), so the
// store thread does not.
//
// Two threads: the store thread runs the transactions, back to back; the ack thread takes each
// committed one (at most kMaxTransactionsToAcknowledge wait for it), pushes its acknowledgements,
// runs `after_finished` and frees its events. So the store thread, the one that bounds how many
// events a second the daemon takes, does only the transactions.
//
// A worker's Finished report goes the same way (EnqueueFinished): applied in the transaction
// after the events queued before it (AttemptLedger::ApplyTrainerEventBatches), acknowledged after
// the commit, then `after_finished` runs (the dispatcher's next pass: the worker is free). So a
// run's last events and its end share one commit with the other workers' work, and the session's
// reader never waits for the store.
//
// Durability: an event is acknowledged only after the transaction that stored it committed. When
// a transaction fails, each session's part is tried again alone, so that one worker's bad event
// cannot keep the others' from being stored; a part that fails alone is dropped unacknowledged
// (the worker sends it again from its outbox) and the session's next Flush returns false.
//
// Backpressure: Enqueue waits while kMaxQueuedEvents events are queued, which stops that session's
// reads (gRPC flow control then holds the worker).
//
// Thread-safety: every method is safe to call concurrently. Lock order: mu_ before the store's
// (the store thread takes mu_ only between transactions).
// The store must outlive the writer; sessions are kept alive by the queue until their events are
// stored.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "daemon/engine/connected_worker.h"
#include "daemon/store/store.h"

namespace xv::daemon {

class EventWriter {
 public:
  // At most this many events go into one transaction (the rest wait for the next one).
  static constexpr size_t kMaxEventsPerTransaction = 8192;
  // Enqueue waits while this many events are queued.
  static constexpr size_t kMaxQueuedEvents = 65536;

  // Committed transactions waiting for the ack thread, at most (then the store thread waits).
  static constexpr size_t kMaxTransactionsToAcknowledge = 2;

  // Starts the store and ack threads. `after_finished` (may be empty) runs on the ack thread after
  // each transaction that applied a Finished, once its acknowledgements are pushed.
  explicit EventWriter(store::Store* store, std::function<void()> after_finished = {});
  ~EventWriter();  // Stop()
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  // Stores everything queued and pushes its acknowledgements, then ends both threads. Later
  // Enqueue calls drop their events (unacknowledged) and return false. Idempotent.
  void Stop();

  // Queues `events` of `session` (in the order the worker sent them). Waits while the queue is
  // full. False when the writer is stopped.
  bool Enqueue(const std::shared_ptr<ConnectedWorker>& session,
               std::vector<xv::v1::TrainerEvent> events);
  // Queues the session's Finished report after everything it queued before (Enqueue's waits and
  // result). Its acknowledgement (or, for an attempt the worker never held, an acknowledgement
  // all the same) is pushed to the session after the commit; when the store fails, or when some
  // of the session's earlier events were dropped (not yet stored), it is dropped unacknowledged
  // and the worker sends it again after them.
  bool EnqueueFinished(const std::shared_ptr<ConnectedWorker>& session, xv::v1::Finished finished);
  // Waits until every event `session` queued before this call has been stored or dropped. False
  // when any of this session's events was dropped since its previous Flush (store error, or the
  // writer stopped).
  bool Flush(const ConnectedWorker& session);
  // Ends the bookkeeping of a session whose reads ended (call after its last Flush).
  void Forget(const ConnectedWorker& session);

 private:
  // Events of one Enqueue call.
  struct EventsChunk {
    std::vector<xv::v1::TrainerEvent> events;
    std::vector<store::StepEventFigures> read_ahead;  // of each event, read by Enqueue
  };
  struct Queued {
    uint64_t ticket = 0;
    std::shared_ptr<ConnectedWorker> session;
    EventsChunk chunk;
    std::vector<xv::v1::Finished> finished;  // EnqueueFinished: one report, no events
  };
  struct SessionProgress {
    uint64_t last_ticket = 0;  // of its newest queued events
    bool dropped = false;      // some of its events were dropped since its last Flush
  };
  // One session's part of a transaction: its queued entries' events, in order, moved here whole
  // (not copied into one vector), and its Finished reports.
  struct SessionBatch {
    std::shared_ptr<ConnectedWorker> session;
    std::vector<EventsChunk> chunks;
    std::vector<xv::v1::Finished> finished;
    size_t events() const;  // in all chunks
  };

  // A committed (or failed) transaction, for the ack thread: applied[i] answers batches[i], empty
  // when that session's part was dropped.
  struct StoredTransaction {
    std::vector<SessionBatch> batches;
    std::vector<std::optional<store::AppliedEvents>> applied;
    bool finished_stored = false;  // some Finished was applied: after_finished_ runs
    uint64_t last_ticket = 0;      // the newest ticket it took
  };

  // Queues one entry (Enqueue, EnqueueFinished); `size` counts against kMaxQueuedEvents.
  bool EnqueueEntry(const std::shared_ptr<ConnectedWorker>& session, Queued entry, size_t size);
  // The store thread: transactions until stopping with nothing queued.
  void RunStore();
  // The ack thread: pushes each stored transaction's acknowledgements, in commit order, then
  // marks its tickets done; ends after the store thread's last transaction.
  void RunAcks();
  // Takes what is queued (up to kMaxEventsPerTransaction events), grouped by session; waits while
  // nothing is. False when stopping with nothing queued. *last_ticket: the newest ticket taken.
  bool TakeQueued(std::vector<SessionBatch>* batches, uint64_t* last_ticket) LOCKS_EXCLUDED(mu_);
  // Stores the batches in one transaction (or one by one after it failed); *stored answers each
  // (its batches are moved in).
  void StoreBatches(std::vector<SessionBatch> batches, StoredTransaction* stored)
      LOCKS_EXCLUDED(mu_);
  // Pushes one session its acknowledgements (events, then Finished reports).
  static void PushAcks(const SessionBatch& batch, store::AppliedEvents* applied);

  store::Store* const store_;
  const std::function<void()> after_finished_;
  Mutex mu_;
  std::condition_variable_any cv_;  // queue changed, tickets done, or stopping
  std::deque<Queued> queue_ GUARDED_BY(mu_);
  size_t queued_events_ GUARDED_BY(mu_) = 0;
  uint64_t next_ticket_ GUARDED_BY(mu_) = 1;
  uint64_t done_ticket_ GUARDED_BY(mu_) = 0;  // every ticket <= this is stored or dropped
  std::map<const ConnectedWorker*, SessionProgress> sessions_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  // Committed transactions, oldest first, for the ack thread.
  std::deque<StoredTransaction> to_acknowledge_ GUARDED_BY(mu_);
  bool store_ended_ GUARDED_BY(mu_) = false;  // the store thread ran its last transaction
  std::thread store_thread_;
  std::thread ack_thread_;
};

}  // namespace xv::daemon
