// One-sided operations streamed over SENDs, for profiles without RDMA
// READ/WRITE (apple-tb5): the requester's side (PumpStreamed), the
// target's checks and answers (HandleStreamed, PumpAnswers). The target
// applies a WRITE and serves a READ only inside a registration it made
// with that right, exactly as a NIC would: an unknown rkey or a missing
// right is PERMISSION_DENIED, a range outside the registration OUT_OF_RANGE.
#include <algorithm>
#include <cstring>

#include "driver/verbs/verbs_connection.hpp"

namespace mcdma::driver::verbs {
namespace {

std::string RefusalDetail(Code code) {
  return code == Code::kOutOfRange
             ? "the peer refused the access: the range is outside its registration"
             : "the peer refused the access: unknown rkey, or the right was not granted";
}

}  // namespace

uint32_t ConnectionImpl::ChunkBytes() const {
  return static_cast<uint32_t>(caps_.max_message_bytes - kOpHeaderBytes);
}

void ConnectionImpl::PostStreamSend(WireType type, const OpHeader& op, const std::byte* data,
                                    uint32_t lkey, uint32_t n) {
  uint32_t idx = sq_free_.back();
  std::byte* ctl = HeaderFor(idx);
  EncodeHeader({type, 0, posted_, static_cast<uint32_t>(kOpHeaderBytes + n)}, ctl);
  EncodeOp(op, ctl + kWireHeaderBytes);
  ibv_sge sge[2] = {
      {reinterpret_cast<uint64_t>(ctl), static_cast<uint32_t>(kWireHeaderBytes + kOpHeaderBytes),
       res_.headers->lkey()},
      {reinterpret_cast<uint64_t>(data), n, lkey}};
  ibv_send_wr wr{};
  wr.wr_id = idx;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.sg_list = sge;
  wr.num_sge = n > 0 ? 2 : 1;
  wr.opcode = IBV_WR_SEND;
  reported_ = posted_;
  ++consumed_;
  PostOnQueue(wr, SqEntry{true, 0, WorkOp::kSend, 0}, 0);
}

bool ConnectionImpl::PumpStreamed(const Request& r) {
  const auto total = static_cast<uint32_t>(r.local.length);
  if (r.kind == Request::kRead) {
    if (reads_out_ >= caps_.max_outstanding_reads || !CanSendMessage()) return false;
    uint32_t id = next_op_++;
    PostStreamSend(WireType::kReadReq, {id, r.remote.rkey, r.remote.addr, 0, total, 0}, nullptr, 0,
                   0);
    streams_[id] = Stream{r.wr_id, WorkOp::kRead, r.local, 0};
    ++reads_out_;
    return true;
  }
  if (front_op_ == 0) front_op_ = next_op_++;
  do {
    if (down_ || !CanSendMessage()) return false;
    uint32_t n = std::min(ChunkBytes(), total - front_sent_);
    const std::byte* data = r.local.region->addr() + r.local.offset + front_sent_;
    PostStreamSend(WireType::kWriteData,
                   {front_op_, r.remote.rkey, r.remote.addr, front_sent_, total, 0}, data,
                   r.local.region->lkey(), n);
    front_sent_ += n;
  } while (front_sent_ < total);
  streams_[front_op_] = Stream{r.wr_id, WorkOp::kWrite, r.local, 0};
  front_sent_ = 0;
  front_op_ = 0;
  return true;
}

void ConnectionImpl::PumpAnswers() {
  while (!down_ && !answers_.empty() && CanSendMessage()) {
    Answer& a = answers_.front();
    if (a.type == WireType::kWriteAck || a.region == nullptr) {
      PostStreamSend(a.type, a.op, nullptr, 0, 0);
      answers_.pop_front();
      continue;
    }
    // READ_DATA from the registration the request named.
    uint32_t n = std::min(ChunkBytes(), a.op.total - a.sent);
    const std::byte* data = a.region->addr() + (a.op.addr - a.region->RemoteAddr(0)) + a.sent;
    OpHeader chunk = a.op;
    chunk.offset = a.sent;
    PostStreamSend(WireType::kReadData, chunk, data, a.region->lkey(), n);
    a.sent += n;
    if (a.sent >= a.op.total) answers_.pop_front();
  }
}

void ConnectionImpl::HandleStreamed(const WireHeader& h, uint32_t slot) {
  const std::byte* base = res_.ring_memory.get() + uint64_t{slot} * res_.local.slot_bytes;
  OpHeader op = DecodeOp(base + kWireHeaderBytes);
  const std::byte* data = base + kWireHeaderBytes + kOpHeaderBytes;
  const auto n = static_cast<uint32_t>(h.length - kOpHeaderBytes);
  if (op.offset > op.total || n > op.total - op.offset) {
    return Fail("protocol violation from the peer: a streamed chunk runs past its operation");
  }
  switch (h.type) {
    case WireType::kWriteData: {
      auto refused = write_status_.find(op.op_id);
      if (refused == write_status_.end()) {
        // Checked per chunk: a registration destroyed mid-operation (the
        // export revoked) refuses the rest.
        const VerbsRegion* region = nullptr;
        Code code =
            device_->CheckRemote(op.rkey, op.addr + op.offset, n, kAccessRemoteWrite, &region);
        if (code == Code::kOk) {
          if (n > 0) {
            std::memcpy(region->addr() + (op.addr + op.offset - region->RemoteAddr(0)), data, n);
          }
        } else {
          refused = write_status_.emplace(op.op_id, static_cast<uint32_t>(code)).first;
        }
      }
      if (op.offset + n == op.total) {
        uint32_t status = refused == write_status_.end() ? 0 : refused->second;
        if (refused != write_status_.end()) write_status_.erase(refused);
        answers_.push_back({WireType::kWriteAck, {op.op_id, 0, 0, 0, op.total, status}});
      }
      break;
    }
    case WireType::kReadReq: {
      const VerbsRegion* region = nullptr;
      Code code = device_->CheckRemote(op.rkey, op.addr, op.total, kAccessRemoteRead, &region);
      op.status = static_cast<uint32_t>(code);
      answers_.push_back({WireType::kReadData, op, code == Code::kOk ? region : nullptr, 0});
      break;
    }
    case WireType::kWriteAck:
    case WireType::kReadData: {
      auto it = streams_.find(op.op_id);
      bool read = h.type == WireType::kReadData;
      if (it == streams_.end() || (it->second.op == WorkOp::kRead) != read) {
        return Fail("protocol violation from the peer: an answer to no operation of ours");
      }
      Stream& s = it->second;
      auto status = static_cast<Code>(op.status);
      bool done = status != Code::kOk;
      if (read && !done) {
        if (op.total != s.local.length) {
          return Fail("protocol violation from the peer: READ_DATA of another length");
        }
        if (n > 0) std::memcpy(s.local.region->addr() + s.local.offset + op.offset, data, n);
        s.received += n;
        done = s.received >= s.local.length;
      }
      if (!read) done = true;
      if (done) {
        ready_.push_back({s.wr_id, s.op, status,
                          status == Code::kOk ? static_cast<uint32_t>(s.local.length) : 0,
                          status == Code::kOk ? "" : RefusalDetail(status)});
        if (read && reads_out_ > 0) --reads_out_;
        streams_.erase(it);
      }
      break;
    }
    default:
      return Fail("protocol violation from the peer: unexpected message type");
  }
  Repost(slot, true);
}

}  // namespace mcdma::driver::verbs
