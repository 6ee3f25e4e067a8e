// ReaderPool: read-only connections lent one read at a time. See reader_pool.h.
#include "daemon/store/reader_pool.h"

#include <utility>

namespace xv::store {

ReadLease::~ReadLease() {
  if (pool_ != nullptr && conn_ != nullptr) pool_->GiveBack(std::move(conn_));
}

Status ReaderPool::Open(const std::string& path, int size, std::unique_ptr<ReaderPool>* out) {
  std::unique_ptr<ReaderPool> pool(new ReaderPool());
  for (int i = 0; i < size; ++i) {
    std::unique_ptr<SqliteConnection> conn;
    XV_RETURN_IF_ERROR(SqliteConnection::Open(path, SqliteConnection::Mode::kReadOnly, &conn));
    MutexLock lock(&pool->mu_);
    pool->idle_.push_back(std::move(conn));
  }
  *out = std::move(pool);
  return Status::Ok();
}

ReadLease ReaderPool::Lend() {
  MutexLock lock(&mu_);
  returned_.wait(mu_, [this] {
    mu_.AssertHeld();
    return !idle_.empty();
  });
  std::unique_ptr<SqliteConnection> conn = std::move(idle_.back());
  idle_.pop_back();
  return ReadLease(this, std::move(conn));
}

void ReaderPool::GiveBack(std::unique_ptr<SqliteConnection> conn) {
  {
    MutexLock lock(&mu_);
    idle_.push_back(std::move(conn));
  }
  returned_.notify_one();
}

}  // namespace xv::store
