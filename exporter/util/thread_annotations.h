// Clang's thread-safety annotations (checked with -Wthread-safety in the clang builds: the fuzz
// build and scripts/tidy.sh) and a Mutex that carries them, since libstdc++'s std::mutex does not.
// With other compilers the annotations expand to nothing. Mutex and MutexLock are thread-safe.
#pragma once

#include <mutex>

#if defined(__clang__)
#define PGLOCK_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define PGLOCK_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) PGLOCK_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY PGLOCK_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) PGLOCK_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) PGLOCK_THREAD_ANNOTATION(pt_guarded_by(x))
#define REQUIRES(...) PGLOCK_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define EXCLUDES(...) PGLOCK_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ACQUIRE(...) PGLOCK_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) PGLOCK_THREAD_ANNOTATION(release_capability(__VA_ARGS__))

namespace pglock {

// A std::mutex the analysis can see. Also satisfies BasicLockable, so it works with
// std::condition_variable_any.
class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }

 private:
  std::mutex mu_;
};

// Holds a Mutex for its scope.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->lock(); }
  ~MutexLock() RELEASE() { mu_->unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

}  // namespace pglock
