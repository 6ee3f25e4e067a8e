// ConnectedWorker: the daemon's view of one connected worker (one Workers.Session stream): who it
// is, what it can run, and the outbox of messages (Assign, Cancel, EventAck, Drain) waiting to be
// written to it. The worker process has its own, unrelated WorkerSession (worker/worker_session.h).
//
// Ownership: shared by the Workers service handler (which reads the stream and runs the writer
// loop) and the Dispatcher (which pushes messages). Thread-safety: every method is safe to call
// concurrently.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "xv/v1/workers.pb.h"

namespace xv::daemon {

class ConnectedWorker {
 public:
  // `cancel_stream` (may be empty) ends the session's RPC so that a reader blocked on the stream
  // returns; it must stay callable until Close().
  ConnectedWorker(int64_t worker_id, const xv::v1::Register& reg,
                  std::function<void()> cancel_stream);

  int64_t worker_id() const { return worker_id_; }
  const std::string& name() const { return name_; }
  const std::vector<std::string>& trainers() const { return trainers_; }
  // Trainers that run code candidates (Capabilities.code_candidate_trainers; issue 16).
  const std::vector<std::string>& code_candidate_trainers() const {
    return code_candidate_trainers_;
  }
  bool has_gpu() const { return has_gpu_; }
  // "backend vendor device-name", lower case: what campaign device filters match.
  const std::string& device_text() const { return device_text_; }
  int max_concurrent() const { return max_concurrent_; }

  // Queues a message for the writer loop. Returns false when the session is closed.
  bool Push(xv::v1::DaemonMessage msg);
  // Waits up to `timeout` for a message. Returns false on timeout or when closed and empty.
  bool Pop(xv::v1::DaemonMessage* msg, std::chrono::milliseconds timeout);
  // Ends the session: no more pushes; wakes the writer; with `cancel_rpc`, cancels the RPC so a
  // reader blocked on the stream returns.
  void Close(bool cancel_rpc = true);
  bool closed() const;

 private:
  const int64_t worker_id_;
  const std::string name_;
  std::vector<std::string> trainers_;
  std::vector<std::string> code_candidate_trainers_;
  bool has_gpu_ = false;
  std::string device_text_;
  int max_concurrent_ = 1;
  const std::function<void()> cancel_stream_;

  mutable Mutex mu_;
  std::condition_variable_any cv_;
  std::deque<xv::v1::DaemonMessage> outbox_ GUARDED_BY(mu_);
  bool closed_ GUARDED_BY(mu_) = false;
};

}  // namespace xv::daemon
