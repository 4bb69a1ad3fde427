// Waiting without spinning forever: futex words and the Bell protocol.
//
// The platform part is FutexWait, FutexWake and FutexWaitMany, implemented
// in common/platform/linux/word_wait_linux.cpp (futex(2), futex_waitv(2))
// and common/platform/darwin/word_wait_darwin.cpp (os_sync_wait_on_address,
// __ulock_wait; FutexWaitMany degrades to a bounded wait on the first word).
// Everything above them is portable.
//
// Measured on 2-vCPU machines: waking a sleeper on the other CPU costs ~30 us,
// so consumers spin (yielding the CPU) for a budget longer than that before
// they sleep. A budget shorter than the wake-up time leaves both sides asleep.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <span>
#include <thread>

#include "mcdma_internal/mailbox_layout.hpp"

namespace mcdma::wait {

// Blocks while word == expected, until woken or timeout (spurious returns
// are allowed). `shared` selects a process-shared futex.
void FutexWait(const std::atomic<uint32_t>* word, uint32_t expected,
               std::chrono::nanoseconds timeout, bool shared);
void FutexWake(const std::atomic<uint32_t>* word, int count, bool shared);

struct WaitTarget {
  const std::atomic<uint32_t>* word;
  uint32_t expected;
  bool shared;
};
// Blocks until any word differs from its expected value, a wake, or the
// timeout. At most kMaxWaitTargets targets (kernel limit).
inline constexpr size_t kMaxWaitTargets = 128;
void FutexWaitMany(std::span<const WaitTarget> targets, std::chrono::nanoseconds timeout);
// Where the OS cannot wait on many words at once (macOS; Linux before
// 5.16), FutexWaitMany sleeps on the first word for at most this long, so
// the others are looked at by polling.
inline constexpr std::chrono::milliseconds kManyWordsPoll{1};

// Producer side of a Bell: call after publishing work with release ordering.
inline void Ring(shm::Bell& bell, bool shared) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (bell.sleeping.load(std::memory_order_relaxed) != 0) {
    bell.seq.fetch_add(1, std::memory_order_release);
    FutexWake(&bell.seq, 1 << 30, shared);
  }
}

// Consumer side, step 1: read the sequence, then announce sleep. The caller
// must re-check for work after this returns and call Sleep only if none.
inline uint32_t PrepareSleep(shm::Bell& bell) {
  uint32_t seq = bell.seq.load(std::memory_order_acquire);
  bell.sleeping.store(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return seq;
}
// Consumer side, step 2 (or instead of it: CancelSleep when work appeared).
inline void CancelSleep(shm::Bell& bell) { bell.sleeping.store(0, std::memory_order_relaxed); }

// Spin-then-sleep pacing for a consumer loop. Spin() returns false once the
// budget since the last Reset() is used up; the caller then sleeps.
class Backoff {
 public:
  explicit Backoff(std::chrono::microseconds budget) : budget_(budget) { Reset(); }
  void Reset() { start_ = std::chrono::steady_clock::now(); }
  // Reset() with another budget (WaitEstimate::Budget).
  void Reset(std::chrono::microseconds budget) {
    budget_ = budget;
    Reset();
  }
  std::chrono::steady_clock::time_point started() const { return start_; }
  bool Spin() {
    if (std::chrono::steady_clock::now() - start_ >= budget_) return false;
    std::this_thread::yield();
    return true;
  }

 private:
  std::chrono::microseconds budget_;
  std::chrono::steady_clock::time_point start_;
};

// How long a waiter should spin before it sleeps: its budget, or, where
// its recent waits were short, about twice as long as they took (at most
// kMaxAdaptiveSpin: waits of 2.5 ms on average or less). A wait that
// usually ends soon (a call's reply, a ping-pong's next request) costs
// less spun through than slept through: waking a sleeper costs ~30 us on
// these CPUs, and under emulation a wake-up and the round trip itself
// both take a hundred times longer. Waits that are longer get the plain
// budget, so an idle or slow peer costs no CPU. Any thread.
inline constexpr std::chrono::microseconds kMaxAdaptiveSpin{5000};
class WaitEstimate {
 public:
  // A wait that took `took`: folded into a moving average (1/8 weight).
  // Counted as at most kObserveCap, so one long idle spell is forgotten
  // after a few short waits.
  static constexpr std::chrono::milliseconds kObserveCap{40};
  void Observe(std::chrono::nanoseconds took) {
    constexpr int64_t kCap = std::chrono::nanoseconds(kObserveCap).count();
    int64_t ns = std::clamp<int64_t>(took.count(), 0, kCap);
    int64_t cur = avg_ns_.load(std::memory_order_relaxed);
    avg_ns_.store(cur == 0 ? ns : cur + (ns - cur) / 8, std::memory_order_relaxed);
  }
  std::chrono::microseconds Budget(std::chrono::microseconds base,
                                   std::chrono::microseconds most = kMaxAdaptiveSpin) const {
    auto avg = std::chrono::nanoseconds(avg_ns_.load(std::memory_order_relaxed));
    if (avg.count() == 0 || avg > most / 2) return base;
    return std::max(base, std::chrono::duration_cast<std::chrono::microseconds>(2 * avg));
  }

 private:
  std::atomic<int64_t> avg_ns_{0};
};

}  // namespace mcdma::wait
