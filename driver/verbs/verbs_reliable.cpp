#include "driver/verbs/verbs_reliable.hpp"

#include <algorithm>

namespace mcdma::driver::verbs {
namespace {

RelDuration Clamp(RelDuration d, const ReliabilityConfig& c) {
  return std::clamp(d, c.rto_min, c.rto_max);
}

std::string Millis(RelDuration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms";
}

}  // namespace

// ---- Sender -----------------------------------------------------------------

ReliableSender::ReliableSender(const ReliabilityConfig& config, RelTime now)
    : config_(config),
      una_(config.first_seq),
      next_(config.first_seq),
      limit_(config.first_seq - 1 + config.window),
      base_rto_(Clamp(config.rto_initial, config)),
      rto_(base_rto_),
      timer_(now) {}

bool ReliableSender::CanSend() const {
  return !failure_ && out_.size() < config_.window && SeqDiff(next_, limit_) <= 0;
}

uint32_t ReliableSender::Send(RelTime now) {
  uint32_t seq = next_++;
  out_.push_back(Entry{now, now});
  if (out_.size() == 1) ArmTimer(now);
  return seq;
}

std::vector<uint32_t> ReliableSender::Acknowledge(uint32_t cum, uint32_t sack, uint32_t limit,
                                                  RelTime now, bool* valid) {
  std::vector<uint32_t> acked;
  // Nothing a peer acknowledges can be newer than what was sent; its limit
  // never stands below what it acknowledged.
  if (SeqDiff(cum, next_ - 1) > 0 || SeqDiff(limit, cum) < 0) {
    if (valid != nullptr) *valid = false;
    return acked;
  }
  if (valid != nullptr) *valid = true;
  if (SeqDiff(limit, limit_) > 0) limit_ = limit;
  std::optional<RelDuration> sample;
  while (!out_.empty() && SeqDiff(cum, una_) >= 0) {
    const Entry& e = out_.front();
    // Karn: a message sent more than once gives no round trip.
    if (e.sends == 1) sample = now - e.first_sent;
    acked.push_back(una_);
    out_.pop_front();
    ++una_;
  }
  for (uint32_t i = 0; i < 32; ++i) {
    if ((sack & (1u << i)) == 0) continue;
    int32_t at = SeqDiff(cum + 2 + i, una_);
    if (at >= 0 && static_cast<size_t>(at) < out_.size())
      out_[static_cast<size_t>(at)].sacked = true;
  }
  if (!acked.empty()) {
    timeouts_in_row_ = 0;
    if (sample) Sample(*sample);
    rto_ = base_rto_;
    if (!out_.empty()) ArmTimer(now);
  }
  return acked;
}

// RFC 6298: SRTT, RTTVAR and RTO = SRTT + 4 RTTVAR, bounded.
void ReliableSender::Sample(RelDuration rtt) {
  if (rtt < RelDuration::zero()) rtt = RelDuration::zero();
  if (!srtt_) {
    srtt_ = rtt;
    rttvar_ = rtt / 2;
  } else {
    RelDuration err = *srtt_ > rtt ? *srtt_ - rtt : rtt - *srtt_;
    rttvar_ = (3 * rttvar_ + err) / 4;
    srtt_ = (7 * *srtt_ + rtt) / 8;
  }
  base_rto_ = Clamp(*srtt_ + 4 * rttvar_, config_);
}

std::vector<uint32_t> ReliableSender::DueAgain(RelTime now) {
  std::vector<uint32_t> again;
  if (failure_ || out_.empty()) return again;
  if (now >= timer_) {
    ++stats_.timeouts;
    if (++timeouts_in_row_ > config_.max_retries) {
      const Entry& oldest = out_.front();
      failure_ = "no acknowledgement: message " + std::to_string(una_) + " was sent " +
                 std::to_string(oldest.sends) + " times over " + Millis(now - oldest.first_sent) +
                 " (" + std::to_string(config_.max_retries) +
                 " retransmission timeouts in a row, the last " + Millis(rto_) + ")";
      return again;
    }
    for (size_t i = 0; i < out_.size(); ++i) {
      Entry& e = out_[i];
      if (e.sacked) continue;
      e.last_sent = now;
      ++e.sends;
      e.fast_resent = false;
      again.push_back(una_ + static_cast<uint32_t>(i));
    }
    stats_.retransmissions += again.size();
    rto_ = std::min(rto_ * 2, config_.rto_max);
    ArmTimer(now);
    return again;
  }
  // Holes with enough later arrivals behind them, out for longer than a
  // round trip and a quarter (the wire may merely have reordered them),
  // were lost: send each once more without waiting for the timer.
  const RelDuration allowance = srtt_ ? *srtt_ + *srtt_ / 4 : rto_;
  uint32_t later = 0;
  std::vector<size_t> holes;
  for (size_t i = out_.size(); i-- > 0;) {
    Entry& e = out_[i];
    if (e.sacked) {
      ++later;
    } else if (!e.fast_resent && later >= config_.hole_evidence && now - e.last_sent >= allowance) {
      holes.push_back(i);
    }
  }
  for (auto it = holes.rbegin(); it != holes.rend(); ++it) {
    Entry& e = out_[*it];
    e.fast_resent = true;
    e.last_sent = now;
    ++e.sends;
    again.push_back(una_ + static_cast<uint32_t>(*it));
  }
  stats_.fast_retransmissions += again.size();
  stats_.retransmissions += again.size();
  return again;
}

std::optional<RelTime> ReliableSender::NextTimer() const {
  if (failure_ || out_.empty()) return std::nullopt;
  return timer_;
}

// ---- Receiver ---------------------------------------------------------------

ReliableReceiver::ReliableReceiver(const ReliabilityConfig& config)
    : config_(config), expected_(config.first_seq), acked_cum_(config.first_seq - 1) {}

bool ReliableReceiver::IsHeld(uint32_t seq) const {
  int32_t at = SeqDiff(seq, expected_);
  return at > 0 && static_cast<size_t>(at) < held_.size() && held_[static_cast<size_t>(at)];
}

ReliableReceiver::Arrival ReliableReceiver::Arrive(uint32_t seq, RelTime now) {
  int32_t d = SeqDiff(seq, expected_);
  if (d < 0 || IsHeld(seq)) {
    // The sender did not hear that it arrived: say so again at once.
    ++stats_.duplicates;
    ack_now_ = true;
    return Arrival::kDuplicate;
  }
  if (static_cast<uint32_t>(d) >= config_.window) {
    ++stats_.out_of_window;
    ack_now_ = true;
    return Arrival::kOutOfWindow;
  }
  if (!ack_pending_since_) ack_pending_since_ = now;
  if (d > 0) {
    if (held_.size() <= static_cast<size_t>(d)) held_.resize(static_cast<size_t>(d) + 1, false);
    held_[static_cast<size_t>(d)] = true;
    ++stats_.held;
    ack_now_ = true;  // a hole: the sender learns of it from the SACK
    return Arrival::kHeld;
  }
  if (!held_.empty()) held_.pop_front();
  ++expected_;
  ++stats_.delivered;
  return Arrival::kDeliver;
}

std::optional<uint32_t> ReliableReceiver::NextInOrder() {
  if (held_.empty() || !held_.front()) return std::nullopt;
  held_.pop_front();
  ++stats_.delivered;
  return expected_++;
}

uint32_t ReliableReceiver::sack() const {
  uint32_t bits = 0;
  for (uint32_t i = 0; i < 32 && i + 1 < held_.size(); ++i) {
    if (held_[i + 1]) bits |= 1u << i;
  }
  return bits;
}

bool ReliableReceiver::AckDue(RelTime now) const {
  if (ack_now_) return true;
  if (SeqDiff(cum(), acked_cum_) >= static_cast<int32_t>(std::max<uint32_t>(1, config_.window / 2)))
    return true;
  return ack_pending_since_ && now - *ack_pending_since_ >= config_.ack_delay;
}

std::optional<RelTime> ReliableReceiver::NextAckTimer() const {
  if (ack_now_) return RelTime::min();
  if (!ack_pending_since_) return std::nullopt;
  return *ack_pending_since_ + config_.ack_delay;
}

void ReliableReceiver::AckSent() {
  ack_pending_since_.reset();
  ack_now_ = false;
  acked_cum_ = cum();
}

}  // namespace mcdma::driver::verbs
