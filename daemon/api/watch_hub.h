// WatchHub: the in-process broadcast behind Experiments.Watch. One feed thread reads the events
// table (the daemon's durable event log: trainer events, the daemon's state/decision/head events)
// after every commit, turns each new row into a WatchEvent and offers it to every subscriber.
//
// A subscriber has a bounded queue: when it is full, events are counted as dropped instead of
// queued, and the subscriber later receives one `dropped` marker (count, and the cursor to
// re-watch from) before the next event. Publishing never waits for a subscriber, so a slow or
// stuck watcher cannot stall the writer or the other watchers.
//
// Streams are served without a thread each (daemon/api/watch_stream.h): a subscription may carry a
// listener, which the feed thread calls after every round of publishing (every poll_ms at the
// latest) and when the subscription closes; the stream pumps its writes from there. At most
// max_streams subscriptions exist at once.
//
// Thread-safety: every method is safe to call concurrently. Notify() is cheap and never blocks on
// the feed (the store's commit listener calls it with the store's mutex held). The store must
// outlive the hub.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "daemon/store/store.h"
#include "xv/v1/experiments.pb.h"

namespace xv::daemon {

// Which events a watcher wants. Empty fields match everything.
struct WatchFilter {
  int64_t campaign_id = 0;
  int64_t experiment_id = 0;
  std::set<std::string> kinds;

  bool Matches(const xv::v1::WatchEvent& ev) const;
};

// Turns a stored event row into what Watch sends. False for rows Watch does not show (audit
// entries other than cancel, the daemon's bookkeeping rows).
bool ToWatchEvent(const store::StoredEvent& row, xv::v1::WatchEvent* out);

// One watcher's queue. Owned (shared) by the hub and the RPC handler.
class WatchSubscription {
 public:
  WatchSubscription(WatchFilter filter, size_t capacity)
      : filter_(std::move(filter)), capacity_(capacity) {}

  enum class PopResult { kEvent, kTimeout, kClosed };
  // The next event (a `dropped` marker first when events were dropped), waiting up to `timeout`.
  PopResult Pop(xv::v1::WatchEvent* out, std::chrono::milliseconds timeout);
  // Called by the hub's feed thread: queues `ev` when the subscription is active, `ev` matches the
  // filter and there is room.
  void Offer(const xv::v1::WatchEvent& ev);
  void Close();
  const WatchFilter& filter() const { return filter_; }
  int64_t dropped_total() const;

  // Sets the function Wake() calls (replacing any earlier one). The listener runs on the hub's
  // feed thread with no hub lock held; it must not block for long and must not call
  // SetListener/ClearListener.
  void SetListener(std::function<void()> listener);
  // Removes the listener; when it returns, no call of it is running or will start.
  void ClearListener();
  // Calls the listener, if any (the hub's feed thread; also after Close).
  void Wake();

 private:
  const WatchFilter filter_;
  const size_t capacity_;
  // Lock order: the hub's mu_ before this mu_ (WatchHub::Activate holds both).
  mutable Mutex mu_;
  std::condition_variable_any cv_;
  std::deque<xv::v1::WatchEvent> queue_ GUARDED_BY(mu_);
  int64_t dropped_ GUARDED_BY(mu_) = 0;  // pending marker count
  int64_t dropped_total_ GUARDED_BY(mu_) = 0;
  int64_t resume_cursor_ GUARDED_BY(mu_) = 0;  // re-watch from here to get the dropped ones
  int64_t last_queued_cursor_ GUARDED_BY(mu_) = 0;
  bool closed_ GUARDED_BY(mu_) = false;
  bool active_ GUARDED_BY(mu_) = false;  // set by WatchHub::Activate
  Mutex listener_mu_;                    // held while the listener runs
  std::function<void()> listener_ GUARDED_BY(listener_mu_);
  friend class WatchHub;
};

struct WatchHubOptions {
  size_t queue_capacity = 4096;  // events per subscriber before it drops
  int poll_ms = 500;             // the feed also looks this often without a notification
  int batch = 500;               // rows per read of the events table
  size_t max_streams = 256;      // subscriptions at once (Watch streams); 0: no limit
};

class WatchHub {
 public:
  WatchHub(store::Store* store, WatchHubOptions options = {});
  ~WatchHub();  // Stop()s

  // Starts the feed at the newest stored event (older ones are replayed per watcher, from the
  // store).
  Status Start();
  // Ends the feed thread and closes every subscription. Idempotent.
  void Stop();
  // New events may be stored: wake the feed.
  void Notify();

  // Registers a watcher, inactive: it queues nothing until Activate, so that a watcher replaying a
  // long backlog from the store does not fill (and drop from) its queue meanwhile.
  // ResourceExhausted (naming the limit) when max_streams watchers are subscribed; Unavailable once
  // the hub is stopping.
  Status Subscribe(WatchFilter filter, std::shared_ptr<WatchSubscription>* out);
  // The subscription starts queueing when the hub has published nothing after `cursor` (the
  // caller has delivered everything up to it from the store): true. False when the hub is further
  // on; the caller replays up to published() and tries again.
  bool Activate(const std::shared_ptr<WatchSubscription>& sub, int64_t cursor);
  void Unsubscribe(const std::shared_ptr<WatchSubscription>& sub);
  // The cursor up to which events have been offered to the subscribers.
  int64_t published() const;
  // Subscriptions now.
  size_t subscribers() const;

 private:
  void FeedLoop();
  // Reads and publishes everything stored after last_; returns false on a store error.
  bool PublishNew();
  // Calls every subscription's listener, without holding mu_.
  void WakeAll();

  store::Store* const store_;
  const WatchHubOptions options_;

  mutable Mutex mu_;
  std::vector<std::shared_ptr<WatchSubscription>> subs_ GUARDED_BY(mu_);
  int64_t last_ GUARDED_BY(mu_) = 0;
  bool closed_ GUARDED_BY(mu_) = false;  // Stop() ran: no new subscriptions

  Mutex wake_mu_;
  std::condition_variable_any wake_cv_;
  bool notified_ GUARDED_BY(wake_mu_) = false;
  bool stopping_ GUARDED_BY(wake_mu_) = false;
  std::thread feed_;
};

}  // namespace xv::daemon
