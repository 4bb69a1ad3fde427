// The conformance suite's wake-up test (see transport_conformance.hpp): an
// owner that arms its connection (Connection::ArmWakeup) and then sleeps
// until the device's notifier runs never misses a message, however the
// arming races the message's arrival.
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>

#include "tests/unit/transport_conformance.hpp"

namespace mcdma::driver::conformance {
namespace {

// Counts the notifier's calls; Wait sleeps until the count passes `seen`.
class Bell {
 public:
  void Ring() {
    std::lock_guard<std::mutex> lock(mu_);
    ++count_;
    cv_.notify_all();
  }
  uint64_t count() {
    std::lock_guard<std::mutex> lock(mu_);
    return count_;
  }
  bool WaitPast(uint64_t seen, std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, limit, [&] { return count_ > seen; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t count_ = 0;
};

// The receiver polls, arms, and sleeps on the notifier when the arming said
// nothing was there; the sender, on a thread of its own, sends each message
// after a random few microseconds, so arrivals land before, during and
// after the arming. A lost wake-up shows as a sleep that outlasts the
// message: the test fails on the first one instead of waiting for a poll.
TEST_P(TransportConformance, ArmedWakeupNeverMissesAMessage) {
  MCDMA_REQUIRE_FEATURE(Feature::kNotifies);
  std::unique_ptr<Device> a_dev = NewDevice();
  std::unique_ptr<Device> b_dev = NewDevice();
  ASSERT_NE(a_dev, nullptr);
  ASSERT_NE(b_dev, nullptr);
  Bell bell;
  b_dev->SetNotifier([&bell] { bell.Ring(); });
  Link link = factory().Connect(*a_dev, *b_dev);
  ASSERT_NE(link.a, nullptr);
  ASSERT_NE(link.b, nullptr);

  constexpr int kMessages = 300;
  std::vector<uint8_t> src = Pattern(64, 9);
  std::vector<uint8_t> dst(64, 0);
  auto src_region = Register(*a_dev, src, kAccessLocal);
  auto dst_region = Register(*b_dev, dst, kAccessLocal);
  ASSERT_NE(src_region, nullptr);
  ASSERT_NE(dst_region, nullptr);

  std::mutex go_mu;
  std::condition_variable go_cv;
  int go = 0;  // messages the receiver is ready for
  std::atomic<bool> sender_failed{false};
  std::thread sender([&] {
    std::mt19937 rng(7);
    std::uniform_int_distribution<int> delay_us(0, 120);
    std::array<WorkCompletion, 8> wcs;
    for (int i = 0; i < kMessages; ++i) {
      {
        std::unique_lock<std::mutex> lock(go_mu);
        if (!go_cv.wait_for(lock, std::chrono::seconds(30), [&] { return go > i; })) break;
      }
      auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(delay_us(rng));
      while (std::chrono::steady_clock::now() < until) link.a->Poll(wcs);  // credits move
      if (!link.a->PostSend(static_cast<uint64_t>(i), {src_region.get(), 0, 64}).ok()) {
        sender_failed = true;
        break;
      }
      // Until its completion: a transport may move the SEND only in Poll.
      bool sent = false;
      auto limit = std::chrono::steady_clock::now() + kWait;
      while (!sent && std::chrono::steady_clock::now() < limit) {
        size_t n = link.a->Poll(wcs);
        for (size_t k = 0; k < n; ++k) {
          if (wcs[k].op == WorkOp::kSend && wcs[k].code == Code::kOk) sent = true;
          if (wcs[k].code != Code::kOk) sender_failed = true;
        }
      }
      if (!sent) {
        sender_failed = true;
        break;
      }
    }
    // Keeps polling while the receiver finishes (credits, acknowledgements).
    while (!sender_failed) {
      {
        std::lock_guard<std::mutex> lock(go_mu);
        if (go > kMessages) break;
      }
      link.a->Poll(wcs);
      std::this_thread::yield();
    }
  });

  int slept = 0;
  int armed_busy = 0;
  std::array<WorkCompletion, 8> wcs;
  for (int i = 0; i < kMessages && !HasFailure(); ++i) {
    ASSERT_TRUE(link.b->PostRecv(static_cast<uint64_t>(1000 + i), {dst_region.get(), 0, 64}).ok());
    {
      std::lock_guard<std::mutex> lock(go_mu);
      go = i + 1;
    }
    go_cv.notify_all();
    bool got = false;
    while (!got && !HasFailure()) {
      size_t n = link.b->Poll(wcs);
      for (size_t k = 0; k < n; ++k) {
        ASSERT_EQ(wcs[k].code, Code::kOk) << wcs[k].detail;
        ASSERT_EQ(wcs[k].op, WorkOp::kRecv);
        ASSERT_EQ(wcs[k].wr_id, static_cast<uint64_t>(1000 + i));
        got = true;
      }
      if (got) break;
      const uint64_t seen = bell.count();
      if (!link.b->ArmWakeup()) {
        ++armed_busy;  // something arrived as we armed: poll again
        continue;
      }
      ++slept;
      ASSERT_TRUE(bell.WaitPast(seen, std::chrono::milliseconds(10000)))
          << "message " << i << ": armed, and the notifier never ran (a lost wake-up)";
      ASSERT_FALSE(sender_failed.load());
    }
    EXPECT_EQ(dst, src);
  }
  {
    std::lock_guard<std::mutex> lock(go_mu);
    go = kMessages + 1;
  }
  go_cv.notify_all();
  sender.join();
  EXPECT_FALSE(sender_failed.load());
  std::cerr << factory().Name() << ": " << kMessages << " messages, slept on the notifier " << slept
            << " times, arming found one arriving " << armed_busy << " times\n";
  EXPECT_GT(slept, 0) << "the receiver never slept: the test did not test the wake-up";
}

}  // namespace
}  // namespace mcdma::driver::conformance
