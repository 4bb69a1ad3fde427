// Waiting on shared words with futex(2), and on many at once with
// futex_waitv(2) (Linux >= 5.16; without it, a bounded wait on the first).
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>

#include "mcdma_internal/wait.hpp"

namespace mcdma::wait {
namespace {

timespec ToTimespec(std::chrono::nanoseconds d) {
  if (d.count() < 0) d = std::chrono::nanoseconds(0);
  timespec ts;
  ts.tv_sec = static_cast<time_t>(d.count() / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(d.count() % 1'000'000'000);
  return ts;
}
// Remembered once the kernel says it has no futex_waitv.
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
    // other words are looked at within kManyWordsPoll.
    auto cap =
        targets.size() == 1 ? timeout : std::min<std::chrono::nanoseconds>(timeout, kManyWordsPoll);
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
    FutexWaitMany(targets, std::min<std::chrono::nanoseconds>(timeout, kManyWordsPoll));
  }
}

}  // namespace mcdma::wait
