// Reliable delivery over UC (driver/verbs/verbs_reliable.hpp): a sender and
// a receiver joined by a fake wire that loses, reorders and duplicates
// packets both ways, on a fake clock. Every message must be delivered
// exactly once and in order, with bounded state, and a wire that stays
// dark longer than the give-up must end in a named failure.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

#include "driver/verbs/verbs_reliable.hpp"

namespace v = mcdma::driver::verbs;
using std::chrono::microseconds;
using std::chrono::milliseconds;

namespace uc_reliability_test {

struct Packet {
  v::RelTime at;  // when it arrives
  bool ack = false;
  uint32_t seq = 0;  // data
  uint32_t cum = 0, sack = 0, limit = 0;
};

// One direction of data (sender -> receiver) and its acknowledgements
// back, each packet lost with `loss`, duplicated with `dup`, and delayed by
// a uniform 20..`jitter_us` µs (so reordered where the jitter allows).
class Wire {
 public:
  struct Setup {
    double loss = 0;
    double dup = 0;
    int jitter_us = 60;
    uint32_t seed = 1;
  };
  explicit Wire(Setup s) : s_(s), rng_(s.seed) {}

  void Send(const Packet& p, v::RelTime now) {
    if (dark_) return;
    int copies = Chance(s_.dup) ? 2 : 1;
    for (int i = 0; i < copies; ++i) {
      if (Chance(s_.loss)) continue;
      Packet q = p;
      q.at =
          now + microseconds(20 + static_cast<int>(rng_() % static_cast<uint32_t>(s_.jitter_us)));
      flight_.emplace(q.at, q);
    }
  }
  // Packets that arrived by `now`, in arrival order.
  std::vector<Packet> Arrived(v::RelTime now) {
    std::vector<Packet> out;
    while (!flight_.empty() && flight_.begin()->first <= now) {
      out.push_back(flight_.begin()->second);
      flight_.erase(flight_.begin());
    }
    return out;
  }
  void set_dark(bool dark) { dark_ = dark; }
  size_t in_flight() const { return flight_.size(); }

 private:
  bool Chance(double p) { return p > 0 && std::uniform_real_distribution<>(0, 1)(rng_) < p; }
  Setup s_;
  std::mt19937 rng_;
  std::multimap<v::RelTime, Packet> flight_;
  bool dark_ = false;
};

struct RunResult {
  std::vector<uint32_t> delivered;  // in delivery order
  uint64_t acked = 0;
  v::SenderStats sender;
  v::ReceiverStats receiver;
  std::optional<std::string> failure;
  uint32_t most_unacked = 0;
  v::RelDuration took{0};
};

// Sends `n` messages through `wire`, stepping the clock by 10 µs, until
// all are acknowledged, the sender gives up or `limit` of fake time passed.
// `dark` (from, to) in fake time since the start: the wire loses
// everything in between.
RunResult Transmit(uint32_t n, Wire& wire, const v::ReliabilityConfig& config,
                   std::pair<milliseconds, milliseconds> dark = {milliseconds(0), milliseconds(0)},
                   milliseconds limit = milliseconds(60000)) {
  const v::RelTime start{};
  v::RelTime now = start;
  v::ReliableSender sender(config, now);
  v::ReliableReceiver receiver(config);
  RunResult r;
  uint32_t numbered = 0;
  while (now - start < limit) {
    wire.set_dark(now - start >= dark.first && now - start < dark.second);
    while (numbered < n && sender.CanSend()) {
      wire.Send(Packet{{}, false, sender.Send(now)}, now);
      ++numbered;
    }
    r.most_unacked = std::max(r.most_unacked, sender.unacked());
    for (const Packet& p : wire.Arrived(now)) {
      if (p.ack) {
        bool valid = false;
        r.acked += sender.Acknowledge(p.cum, p.sack, p.limit, now, &valid).size();
        EXPECT_TRUE(valid);
      } else if (receiver.Arrive(p.seq, now) == v::ReliableReceiver::Arrival::kDeliver) {
        r.delivered.push_back(p.seq);
        while (auto next = receiver.NextInOrder()) r.delivered.push_back(*next);
      }
    }
    if (receiver.AckDue(now)) {
      wire.Send(Packet{{}, true, 0, receiver.cum(), receiver.sack(), receiver.limit()}, now);
      receiver.AckSent();
    }
    for (uint32_t seq : sender.DueAgain(now)) wire.Send(Packet{{}, false, seq}, now);
    if (sender.failure()) break;
    if (r.acked == n) break;
    now += microseconds(10);
  }
  r.sender = sender.stats();
  r.receiver = receiver.stats();
  r.failure = sender.failure();
  r.took = now - start;
  return r;
}

void ExpectExactlyOnceInOrder(const RunResult& r, uint32_t n, uint32_t first = 1) {
  ASSERT_EQ(r.delivered.size(), n);
  for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(r.delivered[i], first + i) << "at " << i;
}

v::ReliabilityConfig Config() {
  v::ReliabilityConfig c;
  c.window = 32;
  return c;
}

TEST(UcReliability, ALosslessWireNeedsNoRetransmission) {
  Wire wire({.jitter_us = 1});  // 20 µs each way, in order
  RunResult r = Transmit(5000, wire, Config());
  ExpectExactlyOnceInOrder(r, 5000);
  EXPECT_FALSE(r.failure);
  EXPECT_EQ(r.acked, 5000u);
  EXPECT_EQ(r.sender.retransmissions, 0u);
  EXPECT_EQ(r.receiver.duplicates, 0u);
  EXPECT_LE(r.most_unacked, 32u);
}

TEST(UcReliability, AReorderingWireDeliversOnceAndInOrderWithFewResends) {
  Wire wire({.jitter_us = 200, .seed = 11});  // 20..220 µs: heavy reordering
  RunResult r = Transmit(5000, wire, Config());
  ASSERT_FALSE(r.failure) << r.failure.value_or("");
  ExpectExactlyOnceInOrder(r, 5000);
  // Nothing was lost: what was sent again was only taken for lost, and
  // the receiver dropped the second copies.
  EXPECT_LT(r.sender.retransmissions, 500u);  // under a tenth
  EXPECT_LE(r.receiver.duplicates, r.sender.retransmissions);
}

class LossyWire : public ::testing::TestWithParam<double> {};

TEST_P(LossyWire, EveryMessageArrivesOnceAndInOrder) {
  const double loss = GetParam();
  for (uint32_t seed = 1; seed <= 5; ++seed) {
    Wire wire({.loss = loss, .dup = 0.01, .jitter_us = 200, .seed = seed});
    RunResult r = Transmit(5000, wire, Config());
    SCOPED_TRACE("loss " + std::to_string(loss) + ", seed " + std::to_string(seed));
    ASSERT_FALSE(r.failure) << r.failure.value_or("");
    ExpectExactlyOnceInOrder(r, 5000);
    EXPECT_EQ(r.acked, 5000u);
    EXPECT_LE(r.most_unacked, 32u);
    // Lost data (and lost acks) were made good by sending again.
    if (loss >= 0.01) {
      EXPECT_GT(r.sender.retransmissions, 0u);
    }
    // Duplicated and resent packets were dropped, never delivered twice.
    EXPECT_GT(r.receiver.duplicates, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Loss, LossyWire, ::testing::Values(0.001, 0.01, 0.05));

TEST(UcReliability, HolesAreSentAgainBeforeTheTimerOnSelectiveAckEvidence) {
  Wire wire({.loss = 0.02, .jitter_us = 40, .seed = 7});
  v::ReliabilityConfig c = Config();
  c.rto_min = milliseconds(20);  // far above the wire's round trip
  RunResult r = Transmit(5000, wire, c);
  ExpectExactlyOnceInOrder(r, 5000);
  EXPECT_GT(r.sender.fast_retransmissions, 0u);
}

TEST(UcReliability, ADarkSpellShorterThanTheGiveUpIsSurvived) {
  Wire wire({.seed = 3});
  // Round trip ~0.1 ms: RTO at its 1 ms floor, doubling to 500 ms: twelve
  // timeouts take about 2 s. A 300 ms outage costs ~9 of them.
  RunResult r = Transmit(20000, wire, Config(), {milliseconds(20), milliseconds(320)});
  ASSERT_FALSE(r.failure) << r.failure.value_or("");
  ExpectExactlyOnceInOrder(r, 20000);
  EXPECT_GT(r.sender.timeouts, 3u);
}

TEST(UcReliability, ADarkSpellLongerThanTheGiveUpEndsInANamedFailure) {
  Wire wire({.seed = 4});
  RunResult r = Transmit(20000, wire, Config(), {milliseconds(20), milliseconds(60000)});
  ASSERT_TRUE(r.failure);
  const std::string why = r.failure.value_or("");
  EXPECT_NE(why.find("no acknowledgement"), std::string::npos) << why;
  EXPECT_NE(why.find("12 retransmission timeouts in a row"), std::string::npos) << why;
  // Given up within a bounded time: the timeouts' sum, not the run's limit.
  EXPECT_LT(r.took, milliseconds(20 + 6000));
  EXPECT_LT(r.delivered.size(), 20000u);
  for (size_t i = 0; i < r.delivered.size(); ++i) ASSERT_EQ(r.delivered[i], i + 1);
}

TEST(UcReliability, TheTimeoutFollowsTheMeasuredRoundTrip) {
  const v::RelTime t0{};
  v::ReliabilityConfig c = Config();
  v::ReliableSender s(c, t0);
  EXPECT_EQ(s.rto(), milliseconds(50));  // before any sample
  v::RelTime now = t0;
  for (int i = 0; i < 50; ++i) {
    uint32_t seq = s.Send(now);
    now += milliseconds(4);
    auto acked = s.Acknowledge(seq, 0, seq + 32, now);
    ASSERT_EQ(acked.size(), 1u);
  }
  EXPECT_EQ(s.srtt().value_or(v::RelDuration::zero()), milliseconds(4));
  // A steady 4 ms round trip: SRTT 4 ms and the variance decays to ~0.
  EXPECT_GE(s.rto(), milliseconds(4));
  EXPECT_LT(s.rto(), milliseconds(6));
  // An expiry doubles it, an acknowledgement of new data restores it.
  uint32_t seq = s.Send(now);
  now += s.rto();
  EXPECT_EQ(s.DueAgain(now), std::vector<uint32_t>{seq});
  EXPECT_GE(s.rto(), milliseconds(8));
  (void)s.Acknowledge(seq, 0, seq + 32, now + milliseconds(1));
  EXPECT_LT(s.rto(), milliseconds(6));
}

TEST(UcReliability, AnAcknowledgementOfWhatWasNeverSentIsRefused) {
  v::ReliableSender s(Config(), v::RelTime{});
  uint32_t a = s.Send(v::RelTime{});
  bool valid = true;
  EXPECT_TRUE(s.Acknowledge(a + 5, 0, a + 40, v::RelTime{}, &valid).empty());
  EXPECT_FALSE(valid);
  EXPECT_TRUE(s.Acknowledge(a, 0, a - 1, v::RelTime{}, &valid).empty());
  EXPECT_FALSE(valid);  // a limit below the ack
  EXPECT_EQ(s.unacked(), 1u);
  EXPECT_EQ(s.Acknowledge(a, 0, a + 32, v::RelTime{}, &valid), std::vector<uint32_t>{a});
  EXPECT_TRUE(valid);
}

TEST(UcReliability, TheSenderStopsAtThePeersLimitAndAStaleAckDoesNotShrinkIt) {
  v::ReliabilityConfig c = Config();
  c.window = 4;
  v::ReliableSender s(c, v::RelTime{});
  for (int i = 0; i < 4; ++i) s.Send(v::RelTime{});
  EXPECT_FALSE(s.CanSend());
  (void)s.Acknowledge(2, 0, 6, v::RelTime{});
  EXPECT_TRUE(s.CanSend());
  s.Send(v::RelTime{});
  s.Send(v::RelTime{});
  EXPECT_FALSE(s.CanSend());                   // 7 > limit 6
  (void)s.Acknowledge(1, 0, 5, v::RelTime{});  // reordered, older
  EXPECT_EQ(s.cum_acked(), 2u);
  (void)s.Acknowledge(6, 0, 10, v::RelTime{});
  EXPECT_TRUE(s.CanSend());
}

TEST(UcReliability, TheReceiverHoldsAheadOfAHoleAndDropsDuplicates) {
  v::ReliabilityConfig c = Config();
  c.window = 8;
  v::ReliableReceiver r(c);
  using A = v::ReliableReceiver::Arrival;
  const v::RelTime t{};
  EXPECT_EQ(r.Arrive(1, t), A::kDeliver);
  EXPECT_FALSE(r.NextInOrder());
  EXPECT_EQ(r.Arrive(3, t), A::kHeld);
  EXPECT_EQ(r.Arrive(4, t), A::kHeld);
  EXPECT_EQ(r.Arrive(4, t), A::kDuplicate);
  EXPECT_EQ(r.Arrive(1, t), A::kDuplicate);
  EXPECT_EQ(r.Arrive(10, t), A::kOutOfWindow);  // beyond cum 1 + 8
  EXPECT_EQ(r.cum(), 1u);
  EXPECT_EQ(r.sack(), 0b11u);  // 3 and 4
  EXPECT_TRUE(r.AckDue(t));
  r.AckSent();
  EXPECT_FALSE(r.AckDue(t));
  EXPECT_EQ(r.Arrive(2, t), A::kDeliver);
  EXPECT_EQ(r.NextInOrder(), 3u);
  EXPECT_EQ(r.NextInOrder(), 4u);
  EXPECT_FALSE(r.NextInOrder());
  EXPECT_EQ(r.cum(), 4u);
  EXPECT_EQ(r.sack(), 0u);
  EXPECT_EQ(r.limit(), 12u);
  // In-order arrivals are acknowledged after the delay, not at once.
  r.AckSent();
  EXPECT_EQ(r.Arrive(5, t), A::kDeliver);
  EXPECT_FALSE(r.AckDue(t));
  EXPECT_TRUE(r.AckDue(t + c.ack_delay));
  EXPECT_EQ(r.stats().duplicates, 2u);
  EXPECT_EQ(r.stats().delivered, 5u);
}

TEST(UcReliability, SequenceNumbersWrap) {
  // Numbers are modulo 2^32: a connection that starts just below the wrap
  // crosses it with loss and reordering like any other.
  EXPECT_GT(v::SeqDiff(2, 0xfffffffeu), 0);
  EXPECT_LT(v::SeqDiff(0xfffffffeu, 2), 0);
  v::ReliabilityConfig c = Config();
  c.first_seq = 0xffffff00u;
  Wire wire({.loss = 0.01, .dup = 0.01, .jitter_us = 200, .seed = 5});
  RunResult r = Transmit(5000, wire, c);
  ASSERT_FALSE(r.failure) << r.failure.value_or("");
  ExpectExactlyOnceInOrder(r, 5000, c.first_seq);
  EXPECT_EQ(r.delivered.back(), c.first_seq + 4999);  // past 0
}

}  // namespace uc_reliability_test
