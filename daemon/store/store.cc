// Store: opens the Database and composes its tables. See store.h.
#include "daemon/store/store.h"

#include <utility>

namespace xv::store {

Store::Store(std::unique_ptr<Database> db)
    : db_(std::move(db)),
      submissions_(db_.get()),
      experiments_(db_.get()),
      attempts_(db_.get()),
      workers_(db_.get()),
      campaigns_(db_.get()),
      rounds_(db_.get()),
      plans_(db_.get()),
      events_(db_.get()),
      tokens_(db_.get()),
      audit_(db_.get()),
      sources_(db_.get()) {}

Status Store::Open(const std::string& path, std::unique_ptr<Store>* out) {
  std::unique_ptr<Database> db;
  XV_RETURN_IF_ERROR(Database::Open(path, Database::Access::kReadWrite, &db));
  std::unique_ptr<Store> store(new Store(std::move(db)));
  // A submission a crash interrupted before its publish was never accepted: its staged rows go.
  XV_RETURN_IF_ERROR(store->submissions().DiscardStagedRows());
  *out = std::move(store);
  return Status::Ok();
}

Status Store::OpenReadOnly(const std::string& path, std::unique_ptr<Store>* out) {
  std::unique_ptr<Database> db;
  XV_RETURN_IF_ERROR(Database::Open(path, Database::Access::kReadOnly, &db));
  out->reset(new Store(std::move(db)));
  return Status::Ok();
}

}  // namespace xv::store
