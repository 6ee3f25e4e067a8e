#include "daemon/engine/worker_session.h"

#include <cctype>
#include <utility>

namespace xv::daemon {

WorkerSession::WorkerSession(int64_t worker_id, const xv::v1::Register& reg,
                             grpc::ServerContext* context)
    : worker_id_(worker_id), name_(reg.worker_name()), context_(context) {
  trainers_.assign(reg.capabilities().trainers().begin(), reg.capabilities().trainers().end());
  const std::string& backend = reg.device().backend();
  has_gpu_ = backend == "cuda" || backend == "rocm";
  device_text_ = reg.device().backend() + " " + reg.device().vendor() + " " + reg.device().name();
  for (char& c : device_text_) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  max_concurrent_ =
      reg.capabilities().max_concurrent() > 0 ? reg.capabilities().max_concurrent() : 1;
}

bool WorkerSession::Push(xv::v1::DaemonMessage msg) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return false;
    outbox_.push_back(std::move(msg));
  }
  cv_.notify_all();
  return true;
}

bool WorkerSession::Pop(xv::v1::DaemonMessage* msg, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return !outbox_.empty() || closed_; });
  if (outbox_.empty()) return false;
  *msg = std::move(outbox_.front());
  outbox_.pop_front();
  return true;
}

void WorkerSession::Close(bool cancel_rpc) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    closed_ = true;
  }
  cv_.notify_all();
  if (cancel_rpc && context_ != nullptr) context_->TryCancel();
}

bool WorkerSession::closed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return closed_;
}

}  // namespace xv::daemon
