// Wire: requests, credits, completions and teardown (the requester side).
#include "driver/tcp/tcp_wire.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <utility>

#include "platform/socket.hpp"

namespace mcdma::driver::tcp {
namespace {

// Big enough that small frames arrive many to a read(); bulk payloads
// bypass it (see ReadMore).
constexpr size_t kStagingBytes = size_t{64} << 10;

}  // namespace

Wire::Wire(Fd fd, std::shared_ptr<ConnShared> shared, WireContext& ctx)
    : fd_(std::move(fd)), shared_(std::move(shared)), ctx_(ctx), staging_(kStagingBytes) {}

void Wire::Deliver(WorkCompletion wc) {
  shared_->Push(std::move(wc));
  ctx_.notify = true;
}

void Wire::Enqueue(const Request& request) {
  if (dead_) {
    Deliver({.wr_id = request.wr_id,
             .op = request.op,
             .code = Code::kLinkDown,
             .byte_len = 0,
             .detail = shared_->DownDetail()});
    return;
  }
  if (request.op == WorkOp::kRecv) {
    recv_queue_.push_back({.wr_id = request.wr_id,
                           .region_id = request.local_key,
                           .offset = request.offset,
                           .length = request.length});
    // PostRecv bounds RECVs to 32 bits (WorkCompletion::byte_len).
    new_credits_.push_back(static_cast<uint32_t>(request.length));
    return;
  }
  Inflight entry;
  entry.request = request;
  entry.seq = base_seq_ + inflight_.size();
  inflight_.push_back(std::move(entry));
}

void Wire::Progress() {
  if (dead_) return;
  GrantCredits();
  Issue();
  Flush();
}

void Wire::GrantCredits() {
  constexpr size_t kPerFrame = kMaxCreditFrameBytes / 4;
  for (size_t i = 0; i < new_credits_.size(); i += kPerFrame) {
    size_t n = std::min(kPerFrame, new_credits_.size() - i);
    OutFrame frame;
    frame.header = {.type = FrameType::kCredit, .length = static_cast<uint32_t>(4 * n)};
    frame.inline_payload.resize(4 * n);
    for (size_t j = 0; j < n; ++j) StoreLe32(&frame.inline_payload[4 * j], new_credits_[i + j]);
    QueueFrame(std::move(frame));
  }
  new_credits_.clear();
}

void Wire::Issue() {
  while (!dead_ && issue_idx_ < inflight_.size()) {
    const Inflight& next = inflight_[issue_idx_];
    const Request& r = next.request;
    OutFrame frame;
    frame.header.wr_id = next.seq;
    switch (r.op) {
      case WorkOp::kSend: {
        // Receiver not ready: the SEND, and everything behind it, waits.
        if (credits_.empty()) return;
        uint32_t credit = credits_.front();
        credits_.pop_front();
        frame.header.type = FrameType::kSend;
        if (r.length > credit) {
          frame.header.status = Code::kOutOfRange;  // consumes the RECV, carries nothing
        } else {
          frame.header.length = static_cast<uint32_t>(r.length);
          frame.region_id = r.local_key;
          frame.offset = r.offset;
        }
        frame.completes_send = true;
        frame.seq = next.seq;
        break;
      }
      case WorkOp::kWrite:
      case WorkOp::kRead:
        frame.header.type = r.op == WorkOp::kWrite ? FrameType::kWrite : FrameType::kReadReq;
        frame.header.rkey = r.remote.rkey;
        frame.header.remote_addr = r.remote.addr;
        frame.header.length = static_cast<uint32_t>(r.length);
        if (r.op == WorkOp::kWrite) {
          frame.region_id = r.local_key;
          frame.offset = r.offset;
        }
        awaiting_.push_back(next.seq);
        break;
      case WorkOp::kRecv:
        break;  // never in inflight_
    }
    ++issue_idx_;
    QueueFrame(std::move(frame));
  }
}

void Wire::QueueFrame(OutFrame frame) {
  if (frame.answer && ++answers_queued_ > kMaxQueuedAnswers) {
    Violation("the peer asks faster than it reads the answers");
    return;
  }
  out_.push_back(std::move(frame));
}

Wire::Inflight* Wire::AwaitedAnswer(const FrameHeader& header, WorkOp op) {
  if (awaiting_.empty() || awaiting_.front() != header.wr_id) return nullptr;
  Inflight& request = inflight_[header.wr_id - base_seq_];
  if (request.request.op != op) return nullptr;
  awaiting_.pop_front();
  return &request;
}

void Wire::CompleteInflight(uint64_t seq, Code code, uint64_t bytes, std::string detail) {
  Inflight& request = inflight_[seq - base_seq_];
  request.done = true;
  request.code = code;
  request.byte_len = code == Code::kOk ? static_cast<uint32_t>(bytes) : 0;
  request.detail = std::move(detail);
  // Released in post order: a later request that finished first waits.
  while (!inflight_.empty() && inflight_.front().done) {
    Inflight& front = inflight_.front();
    Deliver({.wr_id = front.request.wr_id,
             .op = front.request.op,
             .code = front.code,
             .byte_len = front.byte_len,
             .detail = std::move(front.detail)});
    inflight_.pop_front();
    ++base_seq_;
    --issue_idx_;
  }
}

void Wire::CompleteRecv(Code code, uint64_t bytes, std::string detail) {
  const Recv& recv = recv_queue_.front();
  Deliver({.wr_id = recv.wr_id,
           .op = WorkOp::kRecv,
           .code = code,
           .byte_len = code == Code::kOk ? static_cast<uint32_t>(bytes) : 0,
           .detail = std::move(detail)});
  recv_queue_.pop_front();
}

void Wire::Fail(const std::string& detail) {
  if (dead_) return;
  dead_ = true;
  // Post order still holds: finished requests keep their own status.
  for (Inflight& request : inflight_) {
    if (!request.done) {
      request.code = Code::kLinkDown;
      request.byte_len = 0;
      request.detail = detail;
    }
    Deliver({.wr_id = request.request.wr_id,
             .op = request.request.op,
             .code = request.code,
             .byte_len = request.byte_len,
             .detail = std::move(request.detail)});
  }
  inflight_.clear();
  issue_idx_ = 0;
  awaiting_.clear();
  while (!recv_queue_.empty()) CompleteRecv(Code::kLinkDown, 0, detail);
  out_.clear();
  credits_.clear();
  new_credits_.clear();
  shared_->MarkDown(detail);
}

void Wire::Abandon() {
  if (!dead_ && (out_.empty() || out_.front().header_sent == 0)) {
    // Best effort: if the socket has no room, the peer sees EOF instead.
    HeaderBytes close = EncodeHeader({.type = FrameType::kClose});
    (void)platform::SendNoSignal(fd_.get(), close.data(), close.size(), MSG_DONTWAIT);
  }
  dead_ = true;
  shared_->MarkDown("the connection was destroyed");
}

void Wire::Violation(const std::string& what) {
  std::string detail = what;
  if (!detail.starts_with("protocol violation")) detail = "protocol violation: " + detail;
  Fail(detail);
}

}  // namespace mcdma::driver::tcp
