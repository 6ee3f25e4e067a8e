// Mutex and MutexLock: std::mutex and its RAII lock with the thread-safety annotations of
// common/thread_annotations.h, so that `clang -Wthread-safety` checks every GUARDED_BY member and
// every *Locked function. Condition variables wait on a Mutex through std::condition_variable_any
// (Mutex is BasicLockable); waiting releases and retakes the lock the analysis already sees held.
// Thread-safety: a Mutex is shared between threads by design; a MutexLock belongs to one thread.
#pragma once

#include <mutex>

#include "common/thread_annotations.h"

namespace xv {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void unlock() UNLOCK_FUNCTION() { mu_.unlock(); }
  bool try_lock() EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mu_.try_lock(); }
  // For code the analysis cannot follow (a callback that runs under the lock): states the fact.
  void AssertHeld() const ASSERT_EXCLUSIVE_LOCK() {}

 private:
  std::mutex mu_;
};

// Holds `mu` from construction to destruction.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->lock(); }
  ~MutexLock() UNLOCK_FUNCTION() { mu_->unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

}  // namespace xv
