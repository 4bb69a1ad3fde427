// Which mutex guards what, said in the code and checked by clang.
//
// Clang's thread safety analysis (-Wthread-safety, an error in the clang
// builds: the top-level CMakeLists.txt) checks at compile time that a member
// marked MCDMA_GUARDED_BY(mu_) is only touched with mu_ held, that a function
// marked MCDMA_REQUIRES(mu_) is only called with it held, and that one marked
// MCDMA_EXCLUDES(mu_) is not. The analysis looks at one function at a time
// and only at code that says which capability it takes, so:
//   * the macros expand to clang's attributes, and to nothing on other
//     compilers (the gcc build is the same code, unchecked);
//   * libstdc++'s std::mutex and std::lock_guard carry no annotations, so a
//     class whose members are checked holds a Mutex and locks it with a
//     MutexLock (below), never with std::lock_guard or std::unique_lock;
//   * a lambda is a function of its own: one that reads guarded members
//     under its caller's lock says so, `[&]() MCDMA_REQUIRES(mu_) { ... }`
//     (the predicate of a condition variable wait, typically);
//   * MCDMA_NO_THREAD_SAFETY_ANALYSIS turns the check off for one function;
//     it is for accesses that are safe for a reason the analysis cannot see
//     (before any other thread exists, say), and a comment says which.
//
// The macros and classes follow clang's documentation of the analysis
// ("Thread Safety Analysis", the mutex.h example there).
#pragma once

#include <mutex>

#if defined(__clang__)
#define MCDMA_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define MCDMA_THREAD_ANNOTATION_(x)
#endif

// A class that is a capability (a mutex); the name appears in diagnostics.
#define MCDMA_CAPABILITY(name) MCDMA_THREAD_ANNOTATION_(capability(name))
// A RAII class that holds a capability for its lifetime (MutexLock).
#define MCDMA_SCOPED_CAPABILITY MCDMA_THREAD_ANNOTATION_(scoped_lockable)
// A data member that may only be read or written with the capability held.
#define MCDMA_GUARDED_BY(x) MCDMA_THREAD_ANNOTATION_(guarded_by(x))
// A pointer member whose pointee may only be touched with the capability
// held (the pointer itself is not guarded).
#define MCDMA_PT_GUARDED_BY(x) MCDMA_THREAD_ANNOTATION_(pt_guarded_by(x))
// A function that must be called with the capabilities held, and returns
// with them still held.
#define MCDMA_REQUIRES(...) MCDMA_THREAD_ANNOTATION_(requires_capability(__VA_ARGS__))
// A function that must not be called with the capabilities held (it takes
// them itself).
#define MCDMA_EXCLUDES(...) MCDMA_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))
// A function that takes the capabilities and returns holding them (with no
// argument, on a capability class: the object itself).
#define MCDMA_ACQUIRE(...) MCDMA_THREAD_ANNOTATION_(acquire_capability(__VA_ARGS__))
// A function that releases the capabilities it was called holding.
#define MCDMA_RELEASE(...) MCDMA_THREAD_ANNOTATION_(release_capability(__VA_ARGS__))
// A function that tries to take the capabilities and returns `result` (the
// first argument) when it did.
#define MCDMA_TRY_ACQUIRE(...) MCDMA_THREAD_ANNOTATION_(try_acquire_capability(__VA_ARGS__))
// A function that returns a reference to the capability (an accessor for a
// mutex that lives elsewhere).
#define MCDMA_RETURN_CAPABILITY(x) MCDMA_THREAD_ANNOTATION_(lock_returned(x))
// Turns the analysis off inside one function; say why next to it.
#define MCDMA_NO_THREAD_SAFETY_ANALYSIS MCDMA_THREAD_ANNOTATION_(no_thread_safety_analysis)

namespace mcdma {

// A std::mutex the analysis knows about. The same lock, the same cost: the
// annotations are compile-time only. Lock it with a MutexLock; lock(),
// unlock() and try_lock() are there for the rare caller that cannot use a
// scope.
class MCDMA_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() MCDMA_ACQUIRE() { mu_.lock(); }
  void unlock() MCDMA_RELEASE() { mu_.unlock(); }
  bool try_lock() MCDMA_TRY_ACQUIRE(true) { return mu_.try_lock(); }

 private:
  friend class MutexLock;
  std::mutex mu_;
};

// Holds a Mutex for its scope, like std::unique_lock: Unlock() and Lock()
// drop and retake it inside the scope (the analysis follows both), and
// native() is the std::unique_lock that std::condition_variable waits on.
// A wait releases and retakes the mutex inside the call, so to the analysis
// the mutex stays held across it, which is what the caller sees.
//
// Threads: a MutexLock belongs to the thread that made it, like the
// std::unique_lock inside.
class MCDMA_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) MCDMA_ACQUIRE(mu) : lock_(mu.mu_) {}
  // Takes over a Mutex the caller already locked (a successful
  // Mutex::try_lock(): `if (mu_.try_lock()) { MutexLock lock(mu_,
  // std::adopt_lock); ... }`), and unlocks it at the end of the scope.
  MutexLock(Mutex& mu, std::adopt_lock_t) MCDMA_REQUIRES(mu) : lock_(mu.mu_, std::adopt_lock) {}
  ~MutexLock() MCDMA_RELEASE() = default;
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() MCDMA_RELEASE() { lock_.unlock(); }
  void Lock() MCDMA_ACQUIRE() { lock_.lock(); }

  // For std::condition_variable::wait/wait_for/wait_until only; unlocking
  // it directly would hide the release from the analysis (use Unlock()).
  std::unique_lock<std::mutex>& native() { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace mcdma
