#include "daemon/engine/connected_worker.h"

#include <cctype>
#include <utility>

namespace xv::daemon {

ConnectedWorker::ConnectedWorker(int64_t worker_id, const xv::v1::Register& reg,
                                 std::function<void()> cancel_stream)
    : worker_id_(worker_id), name_(reg.worker_name()), cancel_stream_(std::move(cancel_stream)) {
  trainers_.assign(reg.capabilities().trainers().begin(), reg.capabilities().trainers().end());
  code_candidate_trainers_.assign(reg.capabilities().code_candidate_trainers().begin(),
                                  reg.capabilities().code_candidate_trainers().end());
  const std::string& backend = reg.device().backend();
  has_gpu_ = backend == "cuda" || backend == "rocm";
  device_text_ = reg.device().backend() + " " + reg.device().vendor() + " " + reg.device().name();
  for (char& c : device_text_) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  max_concurrent_ =
      reg.capabilities().max_concurrent() > 0 ? reg.capabilities().max_concurrent() : 1;
}

bool ConnectedWorker::Push(xv::v1::DaemonMessage msg) {
  {
    MutexLock lock(&mu_);
    if (closed_) return false;
    outbox_.push_back(std::move(msg));
  }
  cv_.notify_all();
  return true;
}

bool ConnectedWorker::Pop(xv::v1::DaemonMessage* msg, std::chrono::milliseconds timeout) {
  MutexLock lock(&mu_);
  cv_.wait_for(mu_, timeout, [&] {
    mu_.AssertHeld();
    return !outbox_.empty() || closed_;
  });
  if (outbox_.empty()) return false;
  *msg = std::move(outbox_.front());
  outbox_.pop_front();
  return true;
}

void ConnectedWorker::Close(bool cancel_rpc) {
  {
    MutexLock lock(&mu_);
    if (closed_) return;
    closed_ = true;
  }
  cv_.notify_all();
  if (cancel_rpc && cancel_stream_) cancel_stream_();
}

bool ConnectedWorker::closed() const {
  MutexLock lock(&mu_);
  return closed_;
}

}  // namespace xv::daemon
