// Reliable delivery over an unreliable connection (UC queue pairs: Apple's
// Thunderbolt 5 RDMA offers nothing else). A UC SEND that is lost on the
// wire is neither retransmitted nor reported by the device, so the verbs
// transport numbers its messages itself and keeps, per connection:
//
//   ReliableSender    what it sent and the peer has not acknowledged: it
//                     sends again after a retransmission timeout (RTO)
//                     taken from the measured round trip, bounded below
//                     and above and doubled per fruitless try, or at once
//                     for a message the peer's selective acknowledgement
//                     shows as a hole; after max_retries tries in a row
//                     without progress the connection is given up.
//   ReliableReceiver  what arrived: delivers in sequence order exactly
//                     once, holds messages that arrived ahead of a hole,
//                     drops duplicates, and says what to acknowledge: the
//                     cumulative ack, a 32-bit selective ack of the
//                     messages after it, and the highest sequence number
//                     the sender may use (its window).
//
// Pure state, no libibverbs and no clock of its own: every call takes the
// time, so the unit suite drives both halves over a lossy fake wire with a
// fake clock. The window is in sequence numbers, so a lost message never
// costs a credit: the next acknowledgement says again what is allowed.
//
// Sequence numbers are running counts modulo 2^32 from first_seq (1 unless
// configured); first_seq - 1 as a cumulative ack means nothing yet.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

namespace mcdma::driver::verbs {

using RelClock = std::chrono::steady_clock;
using RelTime = RelClock::time_point;
using RelDuration = std::chrono::nanoseconds;

struct ReliabilityConfig {
  uint32_t window = 32;  // messages in flight at most (the peer's receive slots)
  RelDuration rto_initial = std::chrono::milliseconds(50);
  RelDuration rto_min = std::chrono::milliseconds(1);
  RelDuration rto_max = std::chrono::milliseconds(500);
  uint32_t max_retries = 12;  // timeouts in a row without progress: give up
  // An explicit ACK when nothing else carried one for this long.
  RelDuration ack_delay = std::chrono::microseconds(200);
  // A hole is sent again at once when this many later messages arrived.
  uint32_t hole_evidence = 3;
  // The first message's number (both ends must agree; modulo 2^32).
  uint32_t first_seq = 1;
};

// Signed distance a - b of two sequence numbers.
inline int32_t SeqDiff(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b); }

struct SenderStats {
  uint64_t retransmissions = 0;       // messages sent again, all causes
  uint64_t timeouts = 0;              // RTO expiries
  uint64_t fast_retransmissions = 0;  // holes sent again on SACK evidence
};

class ReliableSender {
 public:
  ReliableSender(const ReliabilityConfig& config, RelTime now);

  // A new message may be numbered: fewer than `window` unacknowledged and
  // its number within the peer's last advertised limit.
  bool CanSend() const;
  // Numbers the next message, sent now; the caller keeps what it needs to
  // send it again until Acknowledge returns it.
  uint32_t Send(RelTime now);
  // The peer's acknowledgement: every number up to `cum` arrived, bit i of
  // `sack` says cum + 2 + i arrived, `limit` is the highest number it takes.
  // Returns the numbers newly covered by `cum`, oldest first (the caller
  // frees them). An ack for a number never sent is ignored (false
  // returned in *valid) rather than trusted.
  std::vector<uint32_t> Acknowledge(uint32_t cum, uint32_t sack, uint32_t limit, RelTime now,
                                    bool* valid = nullptr);
  // Numbers to send again now, oldest first: every unacknowledged one not
  // selectively acknowledged when the RTO expired, or holes proven by
  // later arrivals. The caller sends them; they count as sent now.
  std::vector<uint32_t> DueAgain(RelTime now);
  // Set once max_retries timeouts in a row brought no progress: why.
  const std::optional<std::string>& failure() const { return failure_; }
  // When DueAgain next has something to do (nothing unacknowledged: none).
  std::optional<RelTime> NextTimer() const;

  uint32_t unacked() const { return static_cast<uint32_t>(out_.size()); }
  uint32_t cum_acked() const { return una_ - 1; }
  RelDuration rto() const { return rto_; }
  std::optional<RelDuration> srtt() const { return srtt_; }
  uint32_t window() const { return config_.window; }
  const SenderStats& stats() const { return stats_; }

 private:
  struct Entry {
    RelTime first_sent;
    RelTime last_sent;
    uint32_t sends = 1;
    bool sacked = false;
    bool fast_resent = false;  // sent again on evidence since the last timeout
  };
  void Sample(RelDuration rtt);
  void ArmTimer(RelTime now) { timer_ = now + rto_; }

  ReliabilityConfig config_;
  uint32_t una_;           // oldest unacknowledged
  uint32_t next_;          // next to number
  uint32_t limit_;         // the peer's highest allowed
  std::deque<Entry> out_;  // una_ .. next_ - 1
  std::optional<RelDuration> srtt_;
  RelDuration rttvar_{0};
  RelDuration base_rto_;  // from the samples, before backing off
  RelDuration rto_;
  RelTime timer_;
  uint32_t timeouts_in_row_ = 0;
  std::optional<std::string> failure_;
  SenderStats stats_;
};

struct ReceiverStats {
  uint64_t delivered = 0;
  uint64_t duplicates = 0;     // dropped: delivered or held already
  uint64_t held = 0;           // arrived ahead of a hole
  uint64_t out_of_window = 0;  // beyond what was allowed: dropped
};

class ReliableReceiver {
 public:
  explicit ReliableReceiver(const ReliabilityConfig& config);

  enum class Arrival : uint8_t {
    kDeliver,    // next in order: deliver it, then every NextInOrder()
    kHeld,       // ahead of a hole: keep it until NextInOrder() names it
    kDuplicate,  // delivered or held already: drop it
    kOutOfWindow,
  };
  Arrival Arrive(uint32_t seq, RelTime now);
  // After kDeliver: the held numbers now in order, one per call, each to
  // be delivered in turn; none when the next is still missing.
  std::optional<uint32_t> NextInOrder();

  uint32_t cum() const { return expected_ - 1; }
  uint32_t sack() const;
  uint32_t limit() const { return cum() + config_.window; }
  // An explicit ACK should go now (no message of ours carried one).
  bool AckDue(RelTime now) const;
  std::optional<RelTime> NextAckTimer() const;
  // Any message of ours (or an ACK) carried cum/sack/limit as they are now.
  void AckSent();
  const ReceiverStats& stats() const { return stats_; }

 private:
  bool IsHeld(uint32_t seq) const;

  ReliabilityConfig config_;
  uint32_t expected_;
  std::deque<bool> held_;  // held_[i]: expected_ + 1 + i is held
  std::optional<RelTime> ack_pending_since_;
  bool ack_now_ = false;  // loss or a duplicate seen: tell the sender at once
  uint32_t acked_cum_;    // cum as last sent
  ReceiverStats stats_;
};

}  // namespace mcdma::driver::verbs
