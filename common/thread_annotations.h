// Clang thread-safety annotations (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html): the lock
// contracts that comments used to state, in a form `clang -Wthread-safety` checks. They expand to
// nothing under other compilers. Use them with xv::Mutex (common/mutex.h), whose lock and unlock
// the analysis understands; a plain std::mutex is invisible to it.
//
//   Mutex mu_;
//   int64_t next_id_ GUARDED_BY(mu_);            // read or written only with mu_ held
//   Status FlushLocked() EXCLUSIVE_LOCKS_REQUIRED(mu_);
//   Mutex store_mu_ ACQUIRED_AFTER(mu_);          // lock order: mu_ first, then store_mu_
#pragma once

#if defined(__clang__)
#define XV_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define XV_THREAD_ANNOTATION(x)
#endif

// A type whose objects are locks ("mutex" names it in messages).
#define CAPABILITY(x) XV_THREAD_ANNOTATION(capability(x))
// An RAII type that holds a lock for its lifetime.
#define SCOPED_CAPABILITY XV_THREAD_ANNOTATION(scoped_lockable)

// gRPC's headers bring abseil's absl/base/internal/thread_annotations.h, which defines the names
// below with the same meaning (older attribute spellings clang reads alike). A second definition
// of one macro is a -Wmacro-redefined clash whichever header comes first, so where abseil's header
// exists it gives the one definition (its include guard keeps later includes quiet).
#if __has_include(<absl/base/internal/thread_annotations.h>)
#include <absl/base/internal/thread_annotations.h>
#else
// A data member read or written only with the given lock held.
#define GUARDED_BY(x) XV_THREAD_ANNOTATION(guarded_by(x))
// A pointer member whose pointee is read or written only with the given lock held.
#define PT_GUARDED_BY(x) XV_THREAD_ANNOTATION(pt_guarded_by(x))
// Lock order: this lock is taken only after (or before) the given ones.
#define ACQUIRED_AFTER(...) XV_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define ACQUIRED_BEFORE(...) XV_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
// The caller must hold the lock(s), exclusively or shared.
#define EXCLUSIVE_LOCKS_REQUIRED(...) XV_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define SHARED_LOCKS_REQUIRED(...) XV_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
// The caller must not hold the lock(s): the function takes them itself.
#define LOCKS_EXCLUDED(...) XV_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// The function acquires or releases the lock(s) (lock primitives and RAII types).
#define EXCLUSIVE_LOCK_FUNCTION(...) XV_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define UNLOCK_FUNCTION(...) XV_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define EXCLUSIVE_TRYLOCK_FUNCTION(...) XV_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
// The function returns a reference to the given lock.
#define LOCK_RETURNED(x) XV_THREAD_ANNOTATION(lock_returned(x))
// Asserts at run time that the lock is held; the analysis trusts it from there on.
#define ASSERT_EXCLUSIVE_LOCK(...) XV_THREAD_ANNOTATION(assert_capability(__VA_ARGS__))
// Opts one function out of the analysis. Each use says why in a comment.
#define NO_THREAD_SAFETY_ANALYSIS XV_THREAD_ANNOTATION(no_thread_safety_analysis)
#endif  // __has_include(<absl/base/internal/thread_annotations.h>)
