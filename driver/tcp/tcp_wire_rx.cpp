// Wire: the receive path — parse the peer's frames and apply them.
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "driver/tcp/tcp_wire.hpp"
#include "mcdma_internal/sys.hpp"

namespace mcdma::driver::tcp {
namespace {

// Bytes read per wake-up before the I/O thread turns to its other sockets.
constexpr uint64_t kReadBudget = 8ULL << 20;
// One readv segment (a single payload may be up to 4 GiB - 1).
constexpr uint64_t kMaxSegment = 1ULL << 30;

std::string RemoteDetail(Code code) {
  switch (code) {
    case Code::kPermissionDenied:
      return "the peer refused the remote access (unknown rkey, access not granted, or region "
             "deregistered)";
    case Code::kOutOfRange:
      return "remote range outside the registered region";
    default:
      return std::string("the peer failed the request: ") + CodeName(code);
  }
}

}  // namespace

void Wire::OnReadable() {
  uint64_t budget = kReadBudget;
  while (!dead_ && ParseStaged()) {
    ssize_t n = ReadMore();
    if (n <= 0) break;
    if (static_cast<uint64_t>(n) >= budget) {
      ParseStaged();
      break;
    }
    budget -= static_cast<uint64_t>(n);
  }
  // Answers (WRITE_ACK, READ_RESP) and newly issued requests go out now.
  if (!dead_) {
    Issue();
    Flush();
  }
}

bool Wire::ParseStaged() {
  while (!dead_) {
    size_t avail = staged_end_ - staged_begin_;
    if (in_payload_) {
      if (rx_.remaining > 0) {
        if (avail == 0) break;
        uint64_t n = std::min<uint64_t>(avail, rx_.remaining);
        TakePayload(staging_.data() + staged_begin_, n);
        staged_begin_ += n;
        if (rx_.remaining > 0) break;
      }
      in_payload_ = false;
      OnPayloadDone();
      continue;
    }
    if (avail < kHeaderBytes) break;
    Result<FrameHeader> header = DecodeHeader(staging_.data() + staged_begin_);
    staged_begin_ += kHeaderBytes;
    if (!header.ok()) {
      Violation(header.status().message());
      break;
    }
    OnHeader(*header);
  }
  if (dead_) return false;
  // What is left is a partial header: move it to the front.
  size_t avail = staged_end_ - staged_begin_;
  if (avail > 0 && staged_begin_ > 0) {
    std::memmove(staging_.data(), staging_.data() + staged_begin_, avail);
  }
  staged_begin_ = 0;
  staged_end_ = avail;
  return true;
}

void Wire::OnHeader(const FrameHeader& header) {
  rx_.header = header;
  rx_.remaining = HasPayload(header) ? header.length : 0;
  rx_.sink = Sink::kDiscard;
  rx_.region_id = 0;
  rx_.offset = 0;
  rx_.seq = 0;
  rx_.code = Code::kOk;
  rx_.detail.clear();
  rx_.inline_bytes.clear();
  in_payload_ = true;
  switch (header.type) {
    case FrameType::kSend:
      OnSendHeader(header);
      break;
    case FrameType::kWrite:
      OnWriteHeader(header);
      break;
    case FrameType::kReadResp:
      OnReadRespHeader(header);
      break;
    case FrameType::kCredit:
      rx_.sink = Sink::kInline;
      break;
    case FrameType::kHello:
      Violation("HELLO after the handshake");
      break;
    case FrameType::kReadReq:
    case FrameType::kWriteAck:
    case FrameType::kHeartbeat:
    case FrameType::kClose:
      break;  // no payload; handled in OnPayloadDone
  }
}

void Wire::OnSendHeader(const FrameHeader& header) {
  if (recv_queue_.empty()) {
    Violation("SEND without a credit (no RECV posted)");
    return;
  }
  const Recv& recv = recv_queue_.front();
  if (header.status != Code::kOk) {
    rx_.code = header.status;
    rx_.detail = header.status == Code::kOutOfRange ? "incoming SEND larger than this RECV"
                                                    : "the sender could not send the message: " +
                                                          std::string(CodeName(header.status));
    return;
  }
  if (header.length > recv.length) {
    Violation("SEND larger than the RECV it was credited for");
    return;
  }
  rx_.sink = Sink::kMemory;
  rx_.region_id = recv.region_id;
  rx_.offset = recv.offset;
}

void Wire::OnWriteHeader(const FrameHeader& header) {
  if (header.status != Code::kOk) {
    rx_.code = header.status;  // aborted by the initiator: acknowledged as such
    return;
  }
  RemoteTarget target = ctx_.registry.ResolveRemote(header.rkey, kAccessRemoteWrite,
                                                    header.remote_addr, header.length);
  if (target.code != Code::kOk) {
    rx_.code = target.code;  // the payload is received into scratch and dropped
    return;
  }
  rx_.sink = Sink::kMemory;
  rx_.region_id = target.region_id;
  rx_.offset = header.remote_addr;
}

void Wire::OnReadRespHeader(const FrameHeader& header) {
  Inflight* read = AwaitedAnswer(header, WorkOp::kRead);
  if (read == nullptr) {
    Violation("READ_RESP that answers no outstanding READ");
    return;
  }
  rx_.seq = read->seq;
  if (header.status != Code::kOk) {
    rx_.code = header.status;
    rx_.detail = RemoteDetail(header.status);
    return;
  }
  if (header.length != read->request.length) {
    Violation("READ_RESP length differs from the READ");
    return;
  }
  rx_.sink = Sink::kMemory;
  rx_.region_id = read->request.local_key;
  rx_.offset = read->request.offset;
}

void Wire::OnPayloadDone() {
  const FrameHeader& h = rx_.header;
  switch (h.type) {
    case FrameType::kSend:
      CompleteRecv(rx_.code, h.length, rx_.detail);
      break;
    case FrameType::kWrite: {
      OutFrame ack;
      ack.header = {.type = FrameType::kWriteAck, .status = rx_.code, .wr_id = h.wr_id};
      ack.answer = true;
      QueueFrame(std::move(ack));
      break;
    }
    case FrameType::kReadReq:
      OnReadReq(h);
      break;
    case FrameType::kWriteAck:
      OnWriteAck(h);
      break;
    case FrameType::kReadResp:
      CompleteInflight(rx_.seq, rx_.code, h.length, rx_.detail);
      break;
    case FrameType::kCredit:
      for (size_t i = 0; i + 4 <= rx_.inline_bytes.size(); i += 4) {
        credits_.push_back(LoadLe32(&rx_.inline_bytes[i]));
      }
      if (credits_.size() > kMaxHeldCredits) Violation("the peer granted too many credits");
      break;
    case FrameType::kClose:
      Fail("the peer closed the connection");
      break;
    case FrameType::kHeartbeat:
    case FrameType::kHello:
      break;
  }
}

void Wire::OnReadReq(const FrameHeader& header) {
  RemoteTarget target = ctx_.registry.ResolveRemote(header.rkey, kAccessRemoteRead,
                                                    header.remote_addr, header.length);
  OutFrame resp;
  resp.header = {.type = FrameType::kReadResp,
                 .status = target.code,
                 .wr_id = header.wr_id,
                 .length = target.code == Code::kOk ? header.length : 0};
  resp.region_id = target.region_id;
  resp.offset = header.remote_addr;
  resp.answer = true;
  QueueFrame(std::move(resp));
}

void Wire::OnWriteAck(const FrameHeader& header) {
  Inflight* write = AwaitedAnswer(header, WorkOp::kWrite);
  if (write == nullptr) {
    Violation("WRITE_ACK that answers no outstanding WRITE");
    return;
  }
  CompleteInflight(write->seq, header.status, write->request.length,
                   header.status == Code::kOk ? std::string() : RemoteDetail(header.status));
}

void Wire::SinkGone() {
  rx_.sink = Sink::kDiscard;
  rx_.code = Code::kPermissionDenied;
  rx_.detail = "the target region was deregistered during the transfer";
}

void Wire::TakePayload(const std::byte* bytes, uint64_t n) {
  if (rx_.sink == Sink::kMemory) {
    Pin pin = ctx_.registry.PinId(rx_.region_id);
    if (pin) {
      std::memcpy(pin.bytes() + rx_.offset, bytes, n);
      rx_.offset += n;
    } else {
      SinkGone();
    }
  } else if (rx_.sink == Sink::kInline) {
    rx_.inline_bytes.insert(rx_.inline_bytes.end(), bytes, bytes + n);
  }
  rx_.remaining -= n;
}

ssize_t Wire::ReadMore() {
  for (;;) {
    // Staging is empty while a payload is pending (ParseStaged took it all),
    // so the payload's destination comes first and staging catches the
    // headers that follow it.
    iovec iov[2];
    int count = 0;
    Pin pin;
    uint64_t first = 0;
    size_t inline_base = rx_.inline_bytes.size();
    if (in_payload_ && rx_.remaining > 0) {
      first = std::min(rx_.remaining, kMaxSegment);
      if (rx_.sink == Sink::kMemory) {
        pin = ctx_.registry.PinId(rx_.region_id);
        if (!pin) SinkGone();
      }
      if (rx_.sink == Sink::kMemory) {
        iov[0] = {pin.bytes() + rx_.offset, first};
      } else if (rx_.sink == Sink::kInline) {
        rx_.inline_bytes.resize(inline_base + first);  // CREDIT: at most 4 KiB
        iov[0] = {rx_.inline_bytes.data() + inline_base, first};
      } else {
        first = std::min<uint64_t>(first, ctx_.scratch.size());
        iov[0] = {ctx_.scratch.data(), first};
      }
      ++count;
    }
    iov[count++] = {staging_.data() + staged_end_, staging_.size() - staged_end_};
    ssize_t n = readv(fd_.get(), iov, count);
    if (n > 0) {
      uint64_t into_payload = std::min<uint64_t>(static_cast<uint64_t>(n), first);
      if (count == 2) {
        if (rx_.sink == Sink::kMemory) rx_.offset += into_payload;
        if (rx_.sink == Sink::kInline) rx_.inline_bytes.resize(inline_base + into_payload);
        rx_.remaining -= into_payload;
      }
      staged_end_ += static_cast<size_t>(static_cast<uint64_t>(n) - into_payload);
      return n;
    }
    if (rx_.sink == Sink::kInline) rx_.inline_bytes.resize(inline_base);
    if (n == 0) {
      Fail("the peer closed the connection (EOF)");
      return -1;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    Fail(SysError("readv", errno, "data connection").message());
    return -1;
  }
}

}  // namespace mcdma::driver::tcp
