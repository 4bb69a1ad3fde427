// A clock the test moves by hand, for the engine components' time-taking
// calls.
#pragma once

#include <chrono>

#include "engine/call_table.hpp"

namespace mcdma::daemon::testing {

class FakeClock {
 public:
  Clock::time_point now() const { return now_; }
  void Advance(Clock::duration d) { now_ += d; }

 private:
  // Any fixed point: nothing here compares with the system clock.
  Clock::time_point now_ = Clock::time_point{} + std::chrono::hours(1);
};

}  // namespace mcdma::daemon::testing
