#include "daemon/api/watch_hub.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "common/bounded_json_or_discarded.h"
#include "common/run_states.h"
#include "daemon/sched/result_plausibility.h"

namespace xv::daemon {
namespace {

using nlohmann::json;

double Number(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return 0;
  return j[key].get<double>();
}

std::string Text(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_string()) return "";
  return j[key].get<std::string>();
}

}  // namespace

bool WatchFilter::Matches(const xv::v1::WatchEvent& ev) const {
  if (campaign_id != 0 && ev.campaign_id() != campaign_id) return false;
  if (experiment_id != 0 && ev.experiment_id() != experiment_id) return false;
  if (!kinds.empty() && !kinds.count(ev.kind())) return false;
  return true;
}

bool ToWatchEvent(const store::StoredEvent& row, xv::v1::WatchEvent* out) {
  const json j = ParseBoundedJsonOrDiscarded(row.json);
  out->Clear();
  out->set_cursor(row.id);
  out->set_time(row.created_at);
  out->set_campaign_id(row.campaign_id);
  out->set_campaign(row.campaign);
  out->set_round_id(row.round_id);
  out->set_experiment_id(row.experiment_id);
  out->set_attempt(row.attempt);
  out->set_name(row.name);
  out->set_json(row.json);
  if (row.source == "trainer") {
    // The trainer's own event: its type is the kind; start means the experiment runs.
    out->set_kind(row.type);
    if (row.type == "start") out->set_state(std::string(ToString(ExperimentState::kRunning)));
    // A stored step may be anything a trainer wrote (1e300): convert only what fits.
    out->set_step(sched::DoubleToInt64(Number(j, "step")).value_or(0));
    out->set_loss(Number(j, "loss"));
    out->set_tok_per_sec(Number(j, "tok_per_sec"));
    out->set_val_bpb(Number(j, "val_bpb"));
    if (row.type == "nan") out->set_detail(Text(j, "what") + " = " + Text(j, "value"));
    if (row.type == "error") out->set_detail(Text(j, "kind") + ": " + Text(j, "message"));
    return true;
  }
  if (row.source == "daemon" && row.type == "state") {
    out->set_kind("state");
    out->set_state(Text(j, "state"));
    out->set_detail(Text(j, "detail"));
    return true;
  }
  if (row.source == "daemon" && row.type == "lost") {
    out->set_kind("state");
    const bool requeued = j.is_object() && j.value("requeued", false);
    out->set_state(
        std::string(ToString(requeued ? ExperimentState::kQueued : ExperimentState::kLost)));
    out->set_detail("attempt " + std::to_string(row.attempt) + " lost: " + Text(j, "detail"));
    return true;
  }
  if (row.source == "daemon" && row.type == "reclaimed") {
    // A lost attempt whose worker came back with the trainer running is active again.
    out->set_kind("state");
    out->set_state(Text(j, "state"));
    out->set_detail("attempt " + std::to_string(row.attempt) + " reclaimed: " + Text(j, "detail"));
    return true;
  }
  if (row.source == "audit" && row.type == "cancel") {
    out->set_kind("state");
    out->set_state(std::string(ToString(ExperimentState::kCancelled)));
    out->set_detail("cancelled by request");
    return true;
  }
  if (row.source == "daemon" && row.type == "decision") {
    out->set_kind("decision");
    out->set_detail(Text(j, "summary"));
    out->set_name(Text(j, "kept_candidate"));
    return true;
  }
  if (row.source == "daemon" && row.type == "head") {
    out->set_kind("head");
    out->set_name(Text(j, "candidate"));
    out->set_detail(Text(j, "reason"));
    return true;
  }
  return false;
}

WatchSubscription::PopResult WatchSubscription::Pop(xv::v1::WatchEvent* out,
                                                    std::chrono::milliseconds timeout) {
  MutexLock lock(&mu_);
  cv_.wait_for(mu_, timeout, [&] {
    mu_.AssertHeld();
    return closed_ || !queue_.empty() || dropped_ > 0;
  });
  // Queued events come before the gap; the marker comes right after them.
  if (!queue_.empty()) {
    *out = std::move(queue_.front());
    queue_.pop_front();
    return PopResult::kEvent;
  }
  if (dropped_ > 0) {
    out->Clear();
    out->set_kind("dropped");
    out->set_dropped(dropped_);
    out->set_cursor(resume_cursor_);
    out->set_detail(std::to_string(dropped_) + " events dropped: this watcher read too slowly; " +
                    "watch again with since = " + std::to_string(resume_cursor_) + " to get them");
    dropped_ = 0;
    return PopResult::kEvent;
  }
  return closed_ ? PopResult::kClosed : PopResult::kTimeout;
}

void WatchSubscription::Offer(const xv::v1::WatchEvent& ev) {
  if (!filter_.Matches(ev)) return;
  {
    MutexLock lock(&mu_);
    if (closed_ || !active_) return;
    // While a gap is pending, later events are dropped too so that what arrives stays in order:
    // the marker tells where the gap starts.
    if (dropped_ > 0 || queue_.size() >= capacity_) {
      if (dropped_ == 0) resume_cursor_ = last_queued_cursor_;
      ++dropped_;
      ++dropped_total_;
      return;
    }
    queue_.push_back(ev);
    last_queued_cursor_ = ev.cursor();
  }
  cv_.notify_one();
}

void WatchSubscription::Close() {
  {
    MutexLock lock(&mu_);
    closed_ = true;
  }
  cv_.notify_all();
}

void WatchSubscription::SetListener(std::function<void()> listener) {
  MutexLock lock(&listener_mu_);
  listener_ = std::move(listener);
}

void WatchSubscription::ClearListener() {
  MutexLock lock(&listener_mu_);
  listener_ = nullptr;
}

void WatchSubscription::Wake() {
  MutexLock lock(&listener_mu_);
  if (listener_) listener_();
}

int64_t WatchSubscription::dropped_total() const {
  MutexLock lock(&mu_);
  return dropped_total_;
}

WatchHub::WatchHub(store::Store* store, WatchHubOptions options)
    : store_(store), options_(options) {}

WatchHub::~WatchHub() { Stop(); }

Status WatchHub::Start() {
  int64_t newest = 0;
  XV_RETURN_IF_ERROR(store_->events().MaxEventId(&newest));
  {
    MutexLock lock(&mu_);
    last_ = newest;
  }
  feed_ = std::thread([this] { FeedLoop(); });
  return Status::Ok();
}

void WatchHub::Stop() {
  {
    MutexLock lock(&wake_mu_);
    if (stopping_ && !feed_.joinable()) return;
    stopping_ = true;
  }
  wake_cv_.notify_all();
  if (feed_.joinable()) feed_.join();
  std::vector<std::shared_ptr<WatchSubscription>> subs;
  {
    MutexLock lock(&mu_);
    closed_ = true;
    subs.swap(subs_);
  }
  for (auto& s : subs) {
    s->Close();
    s->Wake();  // a stream finishes from its listener
  }
}

void WatchHub::Notify() {
  {
    MutexLock lock(&wake_mu_);
    notified_ = true;
  }
  wake_cv_.notify_one();
}

Status WatchHub::Subscribe(WatchFilter filter, std::shared_ptr<WatchSubscription>* out) {
  auto sub = std::make_shared<WatchSubscription>(std::move(filter), options_.queue_capacity);
  MutexLock lock(&mu_);
  if (closed_) return Status::Unavailable("watch: the daemon is stopping");
  if (options_.max_streams > 0 && subs_.size() >= options_.max_streams) {
    return Status::ResourceExhausted(
        "watch: " + std::to_string(subs_.size()) +
        " streams are open, the daemon's limit (xvd --max-watch-streams); close a watcher or "
        "retry later");
  }
  subs_.push_back(sub);
  *out = std::move(sub);
  return Status::Ok();
}

bool WatchHub::Activate(const std::shared_ptr<WatchSubscription>& sub, int64_t cursor) {
  // Under mu_, no batch is being offered: every event after last_ reaches the active queue.
  MutexLock lock(&mu_);
  if (last_ > cursor) return false;
  MutexLock sub_lock(&sub->mu_);
  sub->active_ = true;
  sub->last_queued_cursor_ = last_;
  return true;
}

void WatchHub::Unsubscribe(const std::shared_ptr<WatchSubscription>& sub) {
  sub->Close();
  MutexLock lock(&mu_);
  for (auto it = subs_.begin(); it != subs_.end(); ++it) {
    if (*it == sub) {
      subs_.erase(it);
      break;
    }
  }
}

int64_t WatchHub::published() const {
  MutexLock lock(&mu_);
  return last_;
}

size_t WatchHub::subscribers() const {
  MutexLock lock(&mu_);
  return subs_.size();
}

void WatchHub::WakeAll() {
  std::vector<std::shared_ptr<WatchSubscription>> subs;
  {
    MutexLock lock(&mu_);
    subs = subs_;
  }
  for (const auto& s : subs) s->Wake();
}

bool WatchHub::PublishNew() {
  while (true) {
    int64_t after = 0;
    bool nobody = false;
    {
      MutexLock lock(&mu_);
      after = last_;
      nobody = subs_.empty();
    }
    if (nobody) {
      // Nobody to offer to: move past what is stored without reading (and parsing) it, which
      // every commit of every worker's events would otherwise cost. A watcher that subscribes
      // later replays from the store up to published() before it activates.
      int64_t newest = 0;
      Status s = store_->events().MaxEventId(&newest);
      if (!s.ok()) {
        spdlog::warn("watch: reading the newest event id: {}", s.ToString());
        return false;
      }
      MutexLock lock(&mu_);
      if (subs_.empty()) {
        last_ = std::max(last_, newest);
        return true;
      }
      continue;  // a watcher came meanwhile: publish as usual
    }
    std::vector<store::StoredEvent> rows;
    Status s = store_->events().ListEventsAfter(after, 0, options_.batch, &rows);
    if (!s.ok()) {
      spdlog::warn("watch: reading events after {}: {}", after, s.ToString());
      return false;
    }
    if (rows.empty()) return true;
    std::vector<xv::v1::WatchEvent> events;
    events.reserve(rows.size());
    for (const auto& row : rows) {
      xv::v1::WatchEvent ev;
      if (ToWatchEvent(row, &ev)) events.push_back(std::move(ev));
    }
    {
      // Offering under mu_ keeps Activate exact: an activated subscriber gets every event after
      // its cursor from the queue, none twice.
      MutexLock lock(&mu_);
      for (const auto& ev : events) {
        for (const auto& sub : subs_) sub->Offer(ev);
      }
      last_ = rows.back().id;
    }
    if (static_cast<int>(rows.size()) < options_.batch) return true;
  }
}

void WatchHub::FeedLoop() {
  while (true) {
    {
      MutexLock lock(&wake_mu_);
      wake_cv_.wait_for(wake_mu_, std::chrono::milliseconds(options_.poll_ms), [&] {
        wake_mu_.AssertHeld();
        return notified_ || stopping_;
      });
      if (stopping_) return;
      notified_ = false;
    }
    PublishNew();
    // Streams write what was queued, and those waiting for idleness look again.
    WakeAll();
  }
}

}  // namespace xv::daemon
