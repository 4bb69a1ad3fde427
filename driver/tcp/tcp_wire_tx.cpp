// Wire: the send path — write queued frames with sendmsg and account for
// partial writes.
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include "driver/tcp/tcp_wire.hpp"
#include "mcdma_internal/sys.hpp"
#include "platform/socket.hpp"

namespace mcdma::driver::tcp {
namespace {

// Bytes written per wake-up before the I/O thread turns to its other sockets.
constexpr uint64_t kWriteBudget = 8ULL << 20;
// iovecs per sendmsg: every frame needs at most two.
constexpr size_t kMaxIov = 64;

uint64_t PayloadBytes(const FrameHeader& header) { return HasPayload(header) ? header.length : 0; }

}  // namespace

void Wire::Flush() {
  uint64_t budget = kWriteBudget;
  while (!dead_ && !out_.empty()) {
    iov_.clear();
    pins_.clear();
    for (OutFrame& frame : out_) {
      if (iov_.size() + 2 > kMaxIov) break;
      if (!PrepareIov(frame, iov_)) {
        pins_.clear();  // the wire went down; never keep a region pinned
        return;
      }
    }
    msghdr msg{};
    msg.msg_iov = iov_.data();
    msg.msg_iovlen = iov_.size();
    ssize_t n = platform::SendMsgNoSignal(fd_.get(), &msg, 0);
    // Pins cover the call only: deregistration may proceed between calls.
    pins_.clear();
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      Fail(SysError("sendmsg", errno, "data connection").message());
      return;
    }
    Advance(static_cast<uint64_t>(n));
    if (static_cast<uint64_t>(n) >= budget) return;
    budget -= static_cast<uint64_t>(n);
  }
}

bool Wire::PrepareIov(OutFrame& frame, std::vector<iovec>& iov) {
  const bool from_region = frame.inline_payload.empty() && PayloadBytes(frame.header) > 0;
  std::byte* base = nullptr;
  if (frame.header_sent == 0) {
    // Nothing of the frame has gone out: its source is checked now, and a
    // vanished one turns the frame into an abort that carries no payload.
    if (from_region) {
      Pin pin = ctx_.registry.PinId(frame.region_id);
      if (pin) {
        base = pin.bytes();
        pins_.push_back(std::move(pin));
      } else {
        frame.header.status = Code::kPermissionDenied;
        frame.header.length = 0;
      }
    }
    frame.encoded = EncodeHeader(frame.header);
  }
  if (frame.header_sent < kHeaderBytes) {
    iov.push_back({frame.encoded.data() + frame.header_sent, kHeaderBytes - frame.header_sent});
  }
  uint64_t left = PayloadBytes(frame.header) - frame.payload_sent;
  if (left == 0) return true;
  if (!frame.inline_payload.empty()) {
    iov.push_back({frame.inline_payload.data() + frame.payload_sent, left});
    return true;
  }
  if (base == nullptr) {
    Pin pin = ctx_.registry.PinId(frame.region_id);
    if (!pin) {
      // Part of the frame is on the wire and promised `length` bytes.
      Fail("a registered region was deregistered while its bytes were being sent");
      return false;
    }
    base = pin.bytes();
    pins_.push_back(std::move(pin));
  }
  iov.push_back({base + frame.offset + frame.payload_sent, left});
  return true;
}

void Wire::Advance(uint64_t bytes) {
  while (bytes > 0 && !out_.empty()) {
    OutFrame& frame = out_.front();
    uint64_t header = std::min<uint64_t>(bytes, kHeaderBytes - frame.header_sent);
    frame.header_sent += static_cast<uint32_t>(header);
    bytes -= header;
    uint64_t payload = std::min(bytes, PayloadBytes(frame.header) - frame.payload_sent);
    frame.payload_sent += payload;
    bytes -= payload;
    if (frame.header_sent < kHeaderBytes || frame.payload_sent < PayloadBytes(frame.header)) {
      return;
    }
    OnWritten(frame);
    out_.pop_front();
  }
}

void Wire::OnWritten(OutFrame& frame) {
  if (frame.answer) --answers_queued_;
  if (!frame.completes_send) return;
  const Code code = frame.header.status;
  std::string detail;
  if (code == Code::kOutOfRange) detail = "SEND larger than the peer's oldest posted RECV";
  if (code == Code::kPermissionDenied) detail = "source region deregistered before the SEND ran";
  CompleteInflight(frame.seq, code, frame.header.length, std::move(detail));
}

}  // namespace mcdma::driver::tcp
