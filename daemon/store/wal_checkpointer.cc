// WalCheckpointer: background WAL checkpoints. See wal_checkpointer.h.
#include "daemon/store/wal_checkpointer.h"

#include <spdlog/spdlog.h>

#include <utility>

namespace xv::store {

Status WalCheckpointer::Open(const std::string& path, std::unique_ptr<WalCheckpointer>* out) {
  std::unique_ptr<SqliteConnection> conn;
  XV_RETURN_IF_ERROR(SqliteConnection::Open(path, SqliteConnection::Mode::kReadWrite, &conn));
  out->reset(new WalCheckpointer(std::move(conn)));
  return Status::Ok();
}

WalCheckpointer::WalCheckpointer(std::unique_ptr<SqliteConnection> conn) : conn_(std::move(conn)) {
  thread_ = std::thread([this] { Run(); });
}

WalCheckpointer::~WalCheckpointer() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void WalCheckpointer::Request() {
  {
    MutexLock lock(&mu_);
    if (requested_) return;
    requested_ = true;
  }
  cv_.notify_all();
}

void WalCheckpointer::Wait() {
  MutexLock lock(&mu_);
  cv_.wait(mu_, [this] {
    mu_.AssertHeld();
    return stopping_ || (!requested_ && !running_);
  });
}

int64_t WalCheckpointer::checkpoints() {
  MutexLock lock(&mu_);
  return checkpoints_;
}

void WalCheckpointer::Run() {
  for (;;) {
    {
      MutexLock lock(&mu_);
      cv_.wait(mu_, [this] {
        mu_.AssertHeld();
        return stopping_ || requested_;
      });
      if (stopping_) return;
      requested_ = false;
      running_ = true;
    }
    int pages = 0, copied = 0;
    // BUSY (another checkpoint runs: the writer's own, or a TRUNCATE) is no failure: the next
    // request copies what this one could not.
    const Status s = conn_->CheckpointWal(/*truncate=*/false, &pages, &copied);
    if (!s.ok()) {
      spdlog::warn("{}: background WAL checkpoint: {}", conn_->path(), s.ToString());
    } else {
      spdlog::trace("{}: background WAL checkpoint: {} of {} WAL pages copied", conn_->path(),
                    copied, pages);
    }
    {
      MutexLock lock(&mu_);
      running_ = false;
      ++checkpoints_;
    }
    cv_.notify_all();
  }
}

}  // namespace xv::store
