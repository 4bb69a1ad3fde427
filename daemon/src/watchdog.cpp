#include "watchdog.hpp"

#include "platform/service_manager.hpp"

namespace mcdma::daemon {

Watchdog::Watchdog(std::function<uint64_t()> rounds) : rounds_(std::move(rounds)) {
  if (auto interval = platform::WatchdogInterval()) {
    thread_ = std::thread([this, interval = *interval] { Loop(interval); });
  }
}

Watchdog::~Watchdog() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::Loop(std::chrono::microseconds interval) {
  uint64_t last = rounds_();
  MutexLock lock(mu_);
  while (!wake_.wait_for(lock.native(), interval / 2,
                         [this]() MCDMA_REQUIRES(mu_) { return stop_; })) {
    uint64_t now = rounds_();
    // Only a live engine loop earns a ping; a stuck one gets restarted.
    if (now != last) platform::NotifyServiceManager("WATCHDOG=1");
    last = now;
  }
}

}  // namespace mcdma::daemon
