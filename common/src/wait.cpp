#include "mcdma_internal/wait.hpp"

#include <cerrno>
#include <climits>
#include <ctime>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#elif defined(__APPLE__)
extern "C" {
int __ulock_wait(uint32_t operation, void* addr, uint64_t value, uint32_t timeout_us);
int __ulock_wake(uint32_t operation, void* addr, uint64_t wake_value);
}
#endif

namespace mcdma::wait {

#if defined(__linux__)
namespace {
timespec ToTimespec(std::chrono::nanoseconds d) {
  if (d.count() < 0) d = std::chrono::nanoseconds(0);
  timespec ts;
  ts.tv_sec = static_cast<time_t>(d.count() / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(d.count() % 1'000'000'000);
  return ts;
}
// futex_waitv is in Linux >= 5.16; remembered once it is found missing.
std::atomic<bool> g_no_waitv{false};
}  // namespace

void FutexWait(const std::atomic<uint32_t>* word, uint32_t expected,
               std::chrono::nanoseconds timeout, bool shared) {
  timespec ts = ToTimespec(timeout);
  int op = shared ? FUTEX_WAIT : (FUTEX_WAIT | FUTEX_PRIVATE_FLAG);
  // Errors (EAGAIN: value changed, ETIMEDOUT, EINTR) all mean "go and look".
  syscall(SYS_futex, reinterpret_cast<const uint32_t*>(word), op, expected, &ts, nullptr, 0);
}

void FutexWake(const std::atomic<uint32_t>* word, int count, bool shared) {
  int op = shared ? FUTEX_WAKE : (FUTEX_WAKE | FUTEX_PRIVATE_FLAG);
  syscall(SYS_futex, reinterpret_cast<const uint32_t*>(word), op, count, nullptr, nullptr, 0);
}

void FutexWaitMany(std::span<const WaitTarget> targets, std::chrono::nanoseconds timeout) {
  if (targets.empty()) {
    timespec ts = ToTimespec(timeout);
    nanosleep(&ts, nullptr);
    return;
  }
  if (targets.size() == 1 || g_no_waitv.load(std::memory_order_relaxed)) {
    // Without futex_waitv, wait on the first word and cap the sleep so the
    // other words are looked at within a millisecond.
    auto cap = targets.size() == 1
                   ? timeout
                   : std::min<std::chrono::nanoseconds>(timeout, std::chrono::milliseconds(1));
    FutexWait(targets[0].word, targets[0].expected, cap, targets[0].shared);
    return;
  }
  futex_waitv waiters[kMaxWaitTargets] = {};
  size_t n = std::min(targets.size(), kMaxWaitTargets);
  for (size_t i = 0; i < n; ++i) {
    waiters[i].val = targets[i].expected;
    waiters[i].uaddr = reinterpret_cast<uintptr_t>(targets[i].word);
    waiters[i].flags = FUTEX_32 | (targets[i].shared ? 0 : FUTEX_PRIVATE_FLAG);
  }
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  auto abs = std::chrono::seconds(now.tv_sec) + std::chrono::nanoseconds(now.tv_nsec) + timeout;
  timespec deadline = ToTimespec(abs);
  long rc =
      syscall(SYS_futex_waitv, waiters, static_cast<unsigned>(n), 0, &deadline, CLOCK_MONOTONIC);
  if (rc < 0 && errno == ENOSYS) {
    g_no_waitv.store(true, std::memory_order_relaxed);
    FutexWaitMany(targets,
                  std::min<std::chrono::nanoseconds>(timeout, std::chrono::milliseconds(1)));
  }
}

#elif defined(__APPLE__)
// Unverified in this repository's CI (no macOS machine): the same contract
// through the private but stable ulock interface used by libc++ itself.
namespace {
constexpr uint32_t kUlCompareAndWait = 1;
constexpr uint32_t kUlCompareAndWaitShared = 3;
constexpr uint32_t kUlfWakeAll = 0x00000100;
}  // namespace

void FutexWait(const std::atomic<uint32_t>* word, uint32_t expected,
               std::chrono::nanoseconds timeout, bool shared) {
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(timeout).count();
  if (us <= 0) us = 1;
  __ulock_wait(shared ? kUlCompareAndWaitShared : kUlCompareAndWait,
               const_cast<std::atomic<uint32_t>*>(word), expected,
               static_cast<uint32_t>(std::min<long long>(us, UINT32_MAX)));
}

void FutexWake(const std::atomic<uint32_t>* word, int count, bool shared) {
  __ulock_wake((shared ? kUlCompareAndWaitShared : kUlCompareAndWait) | kUlfWakeAll,
               const_cast<std::atomic<uint32_t>*>(word), 0);
}

void FutexWaitMany(std::span<const WaitTarget> targets, std::chrono::nanoseconds timeout) {
  if (targets.empty()) {
    std::this_thread::sleep_for(timeout);
    return;
  }
  auto cap = targets.size() == 1
                 ? timeout
                 : std::min<std::chrono::nanoseconds>(timeout, std::chrono::milliseconds(1));
  FutexWait(targets[0].word, targets[0].expected, cap, targets[0].shared);
}
#else
#error "mcdma supports Linux and macOS"
#endif

}  // namespace mcdma::wait
