// The submission path: validating and carrying out what apps put in their
// submission rings. Engine thread only.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "engine/engine.hpp"

namespace mcdma::daemon {
namespace {
constexpr uint32_t kBatchPerSession = 64;

std::string Range(uint64_t off, uint64_t len) {
  return "[" + std::to_string(off) + ", " + std::to_string(off) + "+" + std::to_string(len) + ")";
}
}  // namespace

Clock::time_point Engine::DeadlineFor(const shm::SubmitDesc& d) const {
  auto now = Clock::now();
  if (d.timeout_us != 0) return now + std::chrono::microseconds(d.timeout_us);
  return now + std::chrono::milliseconds(options_.default_timeout_ms);
}

bool Engine::ProcessSubmissions(Session& s) {
  if (s.closing) return false;
  if (s.counters.ring_faults > options_.max_ring_faults) {
    Evict(s, Code::kInvalid,
          "more than " + std::to_string(options_.max_ring_faults) + " ring faults");
    return false;
  }
  // Backpressure: an app that does not drain its completions stops being
  // served (only it) until it does. Only the completion backlog counts: an
  // inbox backlog drains through RELEASEs, which must keep flowing.
  if (s.completion_backlog() > s.geometry().cq_entries) return false;
  auto avail = s.Available();
  if (!avail) {
    uint32_t tail = s.header()->sq_tail.value.load(std::memory_order_acquire);
    RingFault(s, "submission ring tail " + std::to_string(tail) + " is more than " +
                     std::to_string(s.geometry().sq_entries) + " entries ahead of head " +
                     std::to_string(s.sq_head()) + "; skipping to it");
    if (!s.closing) s.ResyncSubmissions(tail);
    return true;
  }
  if (*avail == 0) return false;
  uint32_t n = std::min(*avail, kBatchPerSession);
  for (uint32_t i = 0; i < n && !s.closing; ++i) {
    Handle(s, s.CopySubmission(i), s.sq_head() + i);
  }
  s.Consume(n);
  return true;
}

void Engine::Handle(Session& s, const shm::SubmitDesc& d, uint32_t index) {
  handling_since_ = Clock::now();
  ++s.counters.submitted;
  if (d.opcode > static_cast<uint8_t>(shm::Op::kMaxOp)) {
    ++op_stats_[0].submitted;  // counted (and failed) as "nop": it did nothing
    Reject(
        s, d, Code::kInvalid,
        "unknown opcode " + std::to_string(d.opcode) + " in submission " + std::to_string(index));
    return;
  }
  auto op = static_cast<shm::Op>(d.opcode);
  ++op_stats_[d.opcode].submitted;
  // Draining: finish what is in flight (replies still go through), start nothing new.
  if (draining_ && (op == shm::Op::kCall || op == shm::Op::kNotify || op == shm::Op::kRead ||
                    op == shm::Op::kWrite)) {
    Decline(s, d, Code::kUnavailable, "the daemon is draining (shutting down)");
    return;
  }
  switch (op) {
    case shm::Op::kNop:
      if ((d.flags & shm::kFlagNoCompletion) == 0)
        Complete(s, op, d.tag, Code::kOk, {});
      else
        CountDone(op, Code::kOk, 0);
      break;
    case shm::Op::kCall:
      HandleCall(s, d, /*one_way=*/false);
      break;
    case shm::Op::kNotify:
      HandleCall(s, d, /*one_way=*/true);
      break;
    case shm::Op::kReply:
      HandleReply(s, d);
      break;
    case shm::Op::kRead:
    case shm::Op::kWrite:
      HandleTransfer(s, d);
      break;
    case shm::Op::kRelease:
      HandleRelease(s, d);
      break;
  }
}

void Engine::CountDone(shm::Op op, Code code, uint64_t bytes,
                       std::optional<Clock::time_point> started) {
  auto& stats = op_stats_[static_cast<size_t>(op)];
  if (code == Code::kOk) stats.bytes += bytes;
  // A code this build does not know counts as failed (latency.count) only.
  if (static_cast<size_t>(code) < stats.by_code.size()) ++stats.by_code[static_cast<size_t>(code)];
  std::chrono::duration<double> took = Clock::now() - started.value_or(handling_since_);
  stats.latency.Observe(std::max(took.count(), 0.0));
}

void Engine::Complete(Session& s, shm::Op op, uint64_t tag, Code code, std::string_view message,
                      uint64_t bytes, std::span<const std::byte> payload, Reason reason,
                      std::optional<Clock::time_point> started) {
  CountDone(op, code, bytes, started);
  // An error's payload is its message, so the app can say what was wrong.
  if (code != Code::kOk && payload.empty()) payload = AsBytes(message);
  shm::EventDesc ev{};
  ev.kind = static_cast<uint8_t>(shm::EventKind::kCompletion);
  ev.op = static_cast<uint8_t>(op);
  ev.status = static_cast<uint16_t>(code);
  ev.tag = tag;
  ev.bytes = bytes;
  ev.detail = code == Code::kOk ? 0 : static_cast<uint64_t>(reason);
  if (!PostTo(s, /*inbox=*/false, ev, payload)) {
    Evict(s, Code::kNoMemory,
          "the app does not consume its completions (" + std::to_string(s.backlog()) + " events, " +
              std::to_string(s.backlog_bytes()) +
              " bytes queued: limits.max_backlog or max_backlog_bytes reached)");
  }
}

void Engine::Reject(Session& s, const shm::SubmitDesc& d, Code code, const std::string& message) {
  ++s.counters.invalid;
  ++invalid_total_;
  spdlog::get("engine")->debug("session {}: rejected submission: {}: {}", s.id(), CodeName(code),
                               message);
  Decline(s, d, code, message);
}

void Engine::Decline(Session& s, const shm::SubmitDesc& d, Code code, const std::string& message) {
  Decline(s, d, Status(code, message));
}

void Engine::Decline(Session& s, const shm::SubmitDesc& d, const Status& why) {
  auto op = d.opcode <= static_cast<uint8_t>(shm::Op::kMaxOp) ? static_cast<shm::Op>(d.opcode)
                                                              : shm::Op::kNop;
  Complete(s, op, d.tag, why.code(), why.message(), 0, {}, why.reason());
}

void Engine::RingFault(Session& s, const std::string& message) {
  ++s.counters.ring_faults;
  spdlog::get("engine")->warn("session {} ({}): ring fault: {}", s.id(), s.app_name, message);
  shm::EventDesc ev{};
  ev.kind = static_cast<uint8_t>(shm::EventKind::kFault);
  ev.status = static_cast<uint16_t>(Code::kOutOfRange);
  ev.detail = s.sq_head();
  (void)PostTo(s, /*inbox=*/false, ev, AsBytes(message));
  if (s.counters.ring_faults > options_.max_ring_faults) {
    Evict(s, Code::kInvalid,
          "more than " + std::to_string(options_.max_ring_faults) + " ring faults");
  }
}

void Engine::Evict(Session& s, Code reason, const std::string& message) {
  if (s.closing) return;
  s.closing = true;
  spdlog::get("engine")->warn("session {} ({}, pid {}): closing it: {}: {}", s.id(), s.app_name,
                              s.pid, CodeName(reason), message);
  s.MarkClosed(reason);
  if (s.cancel_stream) s.cancel_stream();
}

void Engine::HandleRelease(Session& s, const shm::SubmitDesc& d) {
  if (!s.Release(d.payload_off, d.payload_len)) {
    Reject(s, d, Code::kInvalid,
           "RELEASE of " + Range(d.payload_off, d.payload_len) +
               ", which is not a range the daemon delivered");
    return;
  }
  CountDone(shm::Op::kRelease, Code::kOk, 0);
}

}  // namespace mcdma::daemon
