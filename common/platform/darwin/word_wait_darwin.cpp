// Waiting on shared words on macOS: os_sync_wait_on_address (macOS 14.4 and
// later, the public interface), else __ulock_wait/__ulock_wake, the private
// but stable interface below it that libc++'s std::atomic::wait uses.
// macOS cannot wait on many words at once: FutexWaitMany waits on the first
// word (the engine's own command bell) for at most kManyWordsPoll, so an
// app's doorbell is noticed within that time once the engine's spin budget
// has run out (docs/architecture.md, "The platform seam").
#include <algorithm>
#include <climits>
#include <cstdint>
#include <thread>

#include "mcdma_internal/wait.hpp"

#if __has_include(<os/os_sync_wait_on_address.h>)
#include <os/clock.h>
#include <os/os_sync_wait_on_address.h>
#define MCDMA_HAVE_OS_SYNC 1
#else
#define MCDMA_HAVE_OS_SYNC 0
#endif

extern "C" {
int __ulock_wait(uint32_t operation, void* addr, uint64_t value, uint32_t timeout_us);
int __ulock_wake(uint32_t operation, void* addr, uint64_t wake_value);
}

namespace mcdma::wait {
namespace {

constexpr uint32_t kUlCompareAndWait = 1;
constexpr uint32_t kUlCompareAndWaitShared = 3;
constexpr uint32_t kUlfWakeAll = 0x00000100;

void* Addr(const std::atomic<uint32_t>* word) {
  return const_cast<std::atomic<uint32_t>*>(word);  // the kernel only reads it
}

}  // namespace

void FutexWait(const std::atomic<uint32_t>* word, uint32_t expected,
               std::chrono::nanoseconds timeout, bool shared) {
  auto ns = std::max<int64_t>(timeout.count(), 1000);
#if MCDMA_HAVE_OS_SYNC
  if (__builtin_available(macOS 14.4, *)) {
    // Errors (value changed, timeout, interrupt) all mean "go and look".
    (void)os_sync_wait_on_address_with_timeout(
        Addr(word), expected, sizeof(uint32_t),
        shared ? OS_SYNC_WAIT_ON_ADDRESS_SHARED : OS_SYNC_WAIT_ON_ADDRESS_NONE,
        OS_CLOCK_MACH_ABSOLUTE_TIME, static_cast<uint64_t>(ns));
    return;
  }
#endif
  auto us = std::min<int64_t>(ns / 1000, UINT32_MAX);
  (void)__ulock_wait(shared ? kUlCompareAndWaitShared : kUlCompareAndWait, Addr(word), expected,
                     static_cast<uint32_t>(us));
}

void FutexWake(const std::atomic<uint32_t>* word, int /*count*/, bool shared) {
#if MCDMA_HAVE_OS_SYNC
  if (__builtin_available(macOS 14.4, *)) {
    (void)os_sync_wake_by_address_all(
        Addr(word), sizeof(uint32_t),
        shared ? OS_SYNC_WAKE_BY_ADDRESS_SHARED : OS_SYNC_WAKE_BY_ADDRESS_NONE);
    return;
  }
#endif
  (void)__ulock_wake((shared ? kUlCompareAndWaitShared : kUlCompareAndWait) | kUlfWakeAll,
                     Addr(word), 0);
}

void FutexWaitMany(std::span<const WaitTarget> targets, std::chrono::nanoseconds timeout) {
  if (targets.empty()) {
    std::this_thread::sleep_for(timeout);
    return;
  }
  auto cap =
      targets.size() == 1 ? timeout : std::min<std::chrono::nanoseconds>(timeout, kManyWordsPoll);
  FutexWait(targets[0].word, targets[0].expected, cap, targets[0].shared);
}

}  // namespace mcdma::wait
