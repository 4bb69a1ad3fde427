// The service manager's watchdog (systemd WatchdogSec): a thread that pings
// while the engine loop makes progress, so that a stuck engine gets the
// daemon restarted. Owned by the Daemon; its thread only reads the engine's
// round counter.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <thread>

#include "mcdma_internal/thread_annotations.hpp"

namespace mcdma::daemon {

class Watchdog {
 public:
  // Pings every interval/2 when rounds() moved since the last look. No
  // thread when the service manager asked for no watchdog.
  explicit Watchdog(std::function<uint64_t()> rounds);
  // Stops the thread at once (it does not finish its sleep).
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  void Loop(std::chrono::microseconds interval) MCDMA_EXCLUDES(mu_);

  std::function<uint64_t()> rounds_;
  Mutex mu_;
  std::condition_variable wake_;
  bool stop_ MCDMA_GUARDED_BY(mu_) = false;  // set once, by the destructor
  std::thread thread_;
};

}  // namespace mcdma::daemon
