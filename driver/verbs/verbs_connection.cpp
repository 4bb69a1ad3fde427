// One verbs connection: messaging with credits over the receive ring,
// one-sided READ/WRITE, and the completions the owner reaps (see
// verbs_transport.hpp).
#include "driver/verbs/verbs_connection.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "driver/post_checks.hpp"

namespace mcdma::driver::verbs {
namespace {

constexpr uint64_t kRecvTag = 1ull << 63;
constexpr uint32_t kMaxPostedRecvs = 1u << 16;

// The stricter profile of two ends: apple-tb5, then mcdma-cx5, then linux-rc.
std::string StricterProfile(const std::string& a, const std::string& b) {
  for (const char* p : {kProfileAppleTb5, kProfileMcdmaCx5}) {
    if (a == p || b == p) return p;
  }
  return a;
}

// What a failed completion means, in words a user can act on.
std::string CompletionMeaning(ibv_wc_status s) {
  switch (s) {
    case IBV_WC_RETRY_EXC_ERR:
      return "transport retry counter exceeded: the peer's QP does not answer (peer daemon "
             "gone, wrong GID or interface, or a crossed/unplugged cable)";
    case IBV_WC_RNR_RETRY_EXC_ERR:
      return "receiver-not-ready retries exceeded: the peer posted no receive in time";
    case IBV_WC_REM_ACCESS_ERR:
      return "remote access error: the peer's registration does not allow this range or right";
    case IBV_WC_REM_INV_REQ_ERR:
      return "remote invalid request: the peer's QP refused the request (length or opcode)";
    case IBV_WC_LOC_LEN_ERR:
      return "local length error: a message larger than the receive slot";
    case IBV_WC_LOC_PROT_ERR:
      return "local protection error: a buffer outside its registration";
    case IBV_WC_WR_FLUSH_ERR:
      return "flushed: the QP went to the error state";
    default:
      return ibv_wc_status_str(s);
  }
}

Code CompletionCode(ibv_wc_status s) {
  switch (s) {
    case IBV_WC_SUCCESS:
      return Code::kOk;
    case IBV_WC_REM_ACCESS_ERR:
      return Code::kPermissionDenied;
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_LOC_LEN_ERR:
      return Code::kOutOfRange;
    case IBV_WC_LOC_PROT_ERR:
      return Code::kInvalid;
    default:
      return Code::kLinkDown;
  }
}

// Signed distance a - b of two running counts modulo 2^32.
int64_t Ahead(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b); }

}  // namespace

ConnectionImpl::ConnectionImpl(DeviceImpl* device, QpResources res, const EndpointInfo& remote,
                               Caps caps, uint32_t sq_limit)
    : device_(device),
      res_(std::move(res)),
      remote_(remote),
      caps_(std::move(caps)),
      sq_limit_(sq_limit),
      sq_(sq_limit) {
  for (uint32_t i = sq_limit; i > 0; --i) sq_free_.push_back(i - 1);
  async_epoch_ = device_->async_epoch();
}

ConnectionImpl::~ConnectionImpl() {
  MutexLock lock(device_->event_mutex());
  res_ = QpResources{};
}

Status ConnectionImpl::Start() {
  if (!res_.ring_posted) {
    for (uint32_t i = 0; i < res_.local.depth; ++i) MCDMA_RETURN_IF_ERROR(PostRing(i));
    res_.ring_posted = true;
  }
  posted_ = res_.local.depth;
  hello_due_ = true;
  Pump();
  return down_ ? Status(Code::kLinkDown, down_reason_) : Status::Ok();
}

Status ConnectionImpl::PostSend(uint64_t wr_id, const LocalSlice& src) {
  MCDMA_RETURN_IF_ERROR(CheckUsable("PostSend", src));
  MCDMA_RETURN_IF_ERROR(
      CheckPostLength("PostSend", src.length, caps_.max_message_bytes, "max_message_bytes"));
  return Queue({Request::kSend, wr_id, src, {}});
}

Status ConnectionImpl::PostRecv(uint64_t wr_id, const LocalSlice& dst) {
  MCDMA_RETURN_IF_ERROR(CheckUsable("PostRecv", dst));
  MCDMA_RETURN_IF_ERROR(
      CheckPostRoom("PostRecv", static_cast<uint32_t>(user_recvs_.size()), kMaxPostedRecvs));
  user_recvs_.push_back({wr_id, dst});
  ++outstanding_;
  Deliver();
  return Status::Ok();
}

Status ConnectionImpl::PostWrite(uint64_t wr_id, const LocalSlice& src, const RemoteSlice& dst) {
  MCDMA_RETURN_IF_ERROR(CheckUsable("PostWrite", src));
  MCDMA_RETURN_IF_ERROR(
      CheckPostLength("PostWrite", src.length, caps_.max_transfer_bytes, "max_transfer_bytes"));
  return Queue({Request::kWrite, wr_id, src, dst});
}

Status ConnectionImpl::PostRead(uint64_t wr_id, const LocalSlice& dst, const RemoteSlice& src) {
  MCDMA_RETURN_IF_ERROR(CheckUsable("PostRead", dst));
  MCDMA_RETURN_IF_ERROR(
      CheckPostLength("PostRead", dst.length, caps_.max_read_bytes, "max_read_bytes"));
  return Queue({Request::kRead, wr_id, dst, src});
}

int ConnectionImpl::ReapCq() {
  ibv_wc wcs[32];
  int total = 0;
  for (;;) {
    int n = ibv_poll_cq(res_.cq.get(), 32, wcs);
    if (n < 0) {
      Fail("ibv_poll_cq failed");
      break;
    }
    for (int i = 0; i < n; ++i) Handle(wcs[i]);
    total += n;
    if (n < 32) break;
  }
  return total;
}

// Arm, then look: a completion that landed before the arming raised no
// event, so it must be found by this poll; one after it raises the event.
bool ConnectionImpl::ArmWakeup() {
  if (down_ || !ready_.empty()) return false;
  if (int rc = ibv_req_notify_cq(res_.cq.get(), 0); rc != 0) {
    Fail(std::string("ibv_req_notify_cq failed: ") + std::strerror(rc));
    return false;
  }
  return ReapCq() == 0 && !down_;
}

size_t ConnectionImpl::Poll(std::span<WorkCompletion> out) {
  CheckAsync();
  ReapCq();
  if (!down_) {
    Deliver();
    Pump();
  }
  if (down_) FlushSoftware();
  size_t k = 0;
  while (k < out.size() && !ready_.empty()) {
    out[k++] = std::move(ready_.front());
    ready_.pop_front();
    --outstanding_;
  }
  return k;
}

Status ConnectionImpl::CheckUsable(const char* op, const LocalSlice& s) const {
  if (down_) return Status(Code::kLinkDown, PostMessage(op, "connection is down: " + down_reason_));
  const auto* region = dynamic_cast<const VerbsRegion*>(s.region);
  const bool ours = region != nullptr && region->device() == device_;
  return CheckLocalSlice(op, s, ours ? std::optional<uint64_t>(region->length()) : std::nullopt);
}

Status ConnectionImpl::Queue(const Request& r) {
  const char* op = PostOpName(r.kind == Request::kSend    ? WorkOp::kSend
                              : r.kind == Request::kWrite ? WorkOp::kWrite
                                                          : WorkOp::kRead);
  uint32_t held = static_cast<uint32_t>(queued_.size() + streams_.size()) + user_in_sq_;
  MCDMA_RETURN_IF_ERROR(CheckPostRoom(op, held, caps_.max_outstanding));
  queued_.push_back(r);
  ++outstanding_;
  Pump();
  return Status::Ok();
}

uint32_t ConnectionImpl::Credits() const {
  int64_t c = Ahead(peer_posted_, consumed_);
  return c > 0 ? static_cast<uint32_t>(c) : 0;
}

uint32_t ConnectionImpl::SqUsed() const {
  return sq_limit_ - static_cast<uint32_t>(sq_free_.size());
}

// One credit and the last queue entry stay free for CREDIT messages.
bool ConnectionImpl::CanSendMessage() const {
  return hello_seen_ && Credits() >= 2 && SqUsed() + 1 < sq_limit_;
}

// Issues what may go now, in order: HELLO, answers owed to the peer, the
// caller's requests; then CREDIT when due.
void ConnectionImpl::Pump() {
  if (down_) return;
  if ((hello_due_ || hello_reply_due_) && SqUsed() < sq_limit_) {
    PostControl(WireType::kHello);
    hello_due_ = hello_reply_due_ = false;
  }
  PumpAnswers();
  while (!down_ && !queued_.empty()) {
    const Request& r = queued_.front();
    if (SqUsed() + 1 >= sq_limit_) break;
    if (r.kind != Request::kSend && !caps_.one_sided) {
      if (!PumpStreamed(r)) break;
      queued_.pop_front();
      continue;
    }
    if (r.kind == Request::kSend && !CanSendMessage()) break;
    if (r.kind == Request::kRead && reads_out_ >= caps_.max_outstanding_reads) break;
    Request req = r;
    queued_.pop_front();
    PostRequest(req);
  }
  if (down_) return;
  uint32_t unreported = posted_ - reported_;
  if (hello_seen_ && unreported >= std::max<uint32_t>(1, res_.local.depth / 2) && Credits() >= 1 &&
      SqUsed() < sq_limit_) {
    PostControl(WireType::kCredit);
  }
}

std::byte* ConnectionImpl::HeaderFor(uint32_t idx) const {
  return res_.header_memory.get() + uint64_t{idx} * kCtlBytes;
}

void ConnectionImpl::PostOnQueue(ibv_send_wr& wr, const SqEntry& e, uint64_t read_bytes) {
  uint32_t idx = static_cast<uint32_t>(wr.wr_id);
  sq_[idx] = e;
  sq_free_.pop_back();
  if (!e.internal) ++user_in_sq_;
  uint64_t send_bytes = 0;
  if (wr.opcode == IBV_WR_SEND) {
    for (int i = 0; i < wr.num_sge; ++i) send_bytes += wr.sg_list[i].length;
  }
  Issue(wr, read_bytes, send_bytes);
}

void ConnectionImpl::PostRequest(const Request& r) {
  uint32_t idx = sq_free_.back();
  ibv_sge sge[2] = {};
  ibv_send_wr wr{};
  wr.wr_id = idx;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.sg_list = sge;
  SqEntry e{false, r.wr_id, WorkOp::kSend, static_cast<uint32_t>(r.local.length)};
  ibv_sge user{reinterpret_cast<uint64_t>(r.local.region->addr() + r.local.offset),
               static_cast<uint32_t>(r.local.length), r.local.region->lkey()};
  if (r.kind == Request::kSend) {
    WireHeader h{WireType::kData, 0, posted_, static_cast<uint32_t>(r.local.length)};
    EncodeHeader(h, HeaderFor(idx));
    sge[0] = {reinterpret_cast<uint64_t>(HeaderFor(idx)), kWireHeaderBytes, res_.headers->lkey()};
    sge[1] = user;
    wr.num_sge = r.local.length > 0 ? 2 : 1;
    wr.opcode = IBV_WR_SEND;
    if (kWireHeaderBytes + r.local.length <= res_.qp.max_inline()) wr.send_flags |= IBV_SEND_INLINE;
    reported_ = posted_;
    ++consumed_;
  } else {
    sge[0] = user;
    wr.num_sge = 1;
    wr.opcode = r.kind == Request::kWrite ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
    wr.wr.rdma.remote_addr = r.remote.addr;
    wr.wr.rdma.rkey = r.remote.rkey;
    e.op = r.kind == Request::kWrite ? WorkOp::kWrite : WorkOp::kRead;
    if (r.kind == Request::kRead) ++reads_out_;
  }
  PostOnQueue(wr, e, e.op == WorkOp::kRead ? r.local.length : 0);
}

void ConnectionImpl::PostControl(WireType type) {
  uint32_t idx = sq_free_.back();
  WireHeader h{type, static_cast<uint8_t>(hello_seen_ ? kFlagSeenPeer : 0), posted_, 0};
  EncodeHeader(h, HeaderFor(idx));
  ibv_sge sge{reinterpret_cast<uint64_t>(HeaderFor(idx)), kWireHeaderBytes, res_.headers->lkey()};
  ibv_send_wr wr{};
  wr.wr_id = idx;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  if (kWireHeaderBytes <= res_.qp.max_inline()) wr.send_flags |= IBV_SEND_INLINE;
  reported_ = posted_;
  if (type == WireType::kCredit) ++consumed_;
  PostOnQueue(wr, SqEntry{true, 0, WorkOp::kSend, 0}, 0);
}

void ConnectionImpl::Issue(ibv_send_wr& wr, uint64_t read_bytes, uint64_t send_bytes) {
  device_->NoteSendQueue(SqUsed(), reads_out_, read_bytes, send_bytes);
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(res_.qp.get(), &wr, &bad); rc != 0) {
    // Not on the queue: give the entry back and complete it as failed.
    uint32_t idx = static_cast<uint32_t>(wr.wr_id);
    SqEntry e = sq_[idx];
    sq_free_.push_back(idx);
    if (e.op == WorkOp::kRead && !e.internal) --reads_out_;
    if (!e.internal) {
      --user_in_sq_;
      ready_.push_back(
          {e.wr_id, e.op, Code::kLinkDown, 0, std::string("ibv_post_send: ") + std::strerror(rc)});
    }
    Fail(std::string("ibv_post_send failed: ") + std::strerror(rc));
  }
}

Status ConnectionImpl::PostRing(uint32_t slot) {
  ibv_sge sge{
      reinterpret_cast<uint64_t>(res_.ring_memory.get() + uint64_t{slot} * res_.local.slot_bytes),
      res_.local.slot_bytes, res_.ring->lkey()};
  ibv_recv_wr wr{};
  wr.wr_id = kRecvTag | slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (int rc = ibv_post_recv(res_.qp.get(), &wr, &bad); rc != 0) {
    return VerbsError("ibv_post_recv", res_.local.device, rc);
  }
  return Status::Ok();
}

void ConnectionImpl::Repost(uint32_t slot, bool counts) {
  if (Status st = PostRing(slot); !st.ok()) return Fail(st.message());
  if (counts) ++posted_;
}

void ConnectionImpl::Handle(const ibv_wc& wc) {
  if ((wc.wr_id & kRecvTag) != 0) return HandleRecv(wc, static_cast<uint32_t>(wc.wr_id));
  uint32_t idx = static_cast<uint32_t>(wc.wr_id);
  if (idx >= sq_.size()) return Fail("completion for an unknown send queue entry");
  SqEntry e = sq_[idx];
  sq_free_.push_back(idx);
  if (e.op == WorkOp::kRead && !e.internal && reads_out_ > 0) --reads_out_;
  Code code = CompletionCode(wc.status);
  std::string detail;
  if (wc.status != IBV_WC_SUCCESS) detail = CompletionMeaning(wc.status);
  if (!e.internal) {
    --user_in_sq_;
    ready_.push_back({e.wr_id, e.op, code, code == Code::kOk ? e.bytes : 0, detail});
  }
  if (wc.status != IBV_WC_SUCCESS) Fail(detail, wc.status == IBV_WC_WR_FLUSH_ERR);
}

void ConnectionImpl::HandleRecv(const ibv_wc& wc, uint32_t slot) {
  if (wc.status != IBV_WC_SUCCESS) {
    Fail("receive failed: " + CompletionMeaning(wc.status), wc.status == IBV_WC_WR_FLUSH_ERR);
    return;
  }
  std::byte* base = res_.ring_memory.get() + uint64_t{slot} * res_.local.slot_bytes;
  auto h = DecodeHeader(base, wc.byte_len);
  if (!h.ok()) return Fail("protocol violation from the peer: " + h.status().message());
  if (Ahead(h->posted, peer_posted_) > 0) peer_posted_ = h->posted;
  if (h->type != WireType::kHello) hello_seen_ = true;
  switch (h->type) {
    case WireType::kHello:
      if ((h->flags & kFlagSeenPeer) == 0) hello_reply_due_ = true;
      hello_seen_ = true;
      return Repost(slot, false);  // HELLOs take no credit
    case WireType::kCredit:
      return Repost(slot, true);
    case WireType::kData:
      arrived_.push_back({slot, h->length});
      return;
    default:
      return HandleStreamed(*h, slot);
  }
}

// Hands arrived messages to the caller's RECVs, oldest to oldest.
void ConnectionImpl::Deliver() {
  while (!down_ && !arrived_.empty() && !user_recvs_.empty()) {
    Arrived a = arrived_.front();
    UserRecv r = user_recvs_.front();
    arrived_.pop_front();
    user_recvs_.pop_front();
    const std::byte* payload =
        res_.ring_memory.get() + uint64_t{a.slot} * res_.local.slot_bytes + kWireHeaderBytes;
    if (a.length > r.dst.length) {
      ready_.push_back({r.wr_id, WorkOp::kRecv, Code::kOutOfRange, 0,
                        "message of " + std::to_string(a.length) +
                            " bytes is larger than the posted RECV (" +
                            std::to_string(r.dst.length) + ")"});
    } else {
      if (a.length > 0) std::memcpy(r.dst.region->addr() + r.dst.offset, payload, a.length);
      ready_.push_back({r.wr_id, WorkOp::kRecv, Code::kOk, a.length, ""});
    }
    Repost(a.slot, true);
  }
}

void ConnectionImpl::CheckAsync() {
  uint64_t epoch = device_->async_epoch();
  if (epoch == async_epoch_) return;
  async_epoch_ = epoch;
  std::string why = device_->AsyncFailure(res_.local.qpn);
  if (!why.empty()) Fail(why);
}

// Down for good: the QP goes to ERROR so the device flushes what it holds.
// A flush only says the QP is in error; the completion that put it there
// (it may come later in the same poll) says why, so it wins.
void ConnectionImpl::Fail(const std::string& why, bool flush) {
  if (down_) {
    if (down_by_flush_ && !flush) {
      down_reason_ = why;
      down_by_flush_ = false;
    }
    return;
  }
  down_ = true;
  down_reason_ = why;
  down_by_flush_ = flush;
  (void)res_.qp.ToError();
}

void ConnectionImpl::FlushSoftware() {
  for (const Request& r : queued_) {
    WorkOp op = r.kind == Request::kSend    ? WorkOp::kSend
                : r.kind == Request::kWrite ? WorkOp::kWrite
                                            : WorkOp::kRead;
    ready_.push_back({r.wr_id, op, Code::kLinkDown, 0, down_reason_});
  }
  queued_.clear();
  front_sent_ = 0;
  for (const auto& [id, s] : streams_)
    ready_.push_back({s.wr_id, s.op, Code::kLinkDown, 0, down_reason_});
  streams_.clear();
  answers_.clear();
  for (const UserRecv& r : user_recvs_)
    ready_.push_back({r.wr_id, WorkOp::kRecv, Code::kLinkDown, 0, down_reason_});
  user_recvs_.clear();
}

Result<std::unique_ptr<Connection>> MakeConnection(DeviceImpl* device, QpResources res,
                                                   const EndpointInfo& remote) {
  const EndpointInfo& local = res.local;
  if (remote.unreliable != local.unreliable) {
    return Status(Code::kInvalid, "verbs profiles do not match: this end runs " + local.profile +
                                      " (" + (local.unreliable ? "UC" : "RC") + "), the peer " +
                                      remote.profile + " (" + (remote.unreliable ? "UC" : "RC") +
                                      "); force the same profile on both (verbs.profile)");
  }
  MCDMA_ASSIGN_OR_RETURN(uint32_t mtu, NegotiateMtu(local.mtu, remote.mtu));
  const VerbsConfig& config = device->config();
  QpEndpoint peer{remote.qpn, remote.psn, remote.gid, remote.mtu};
  MCDMA_RETURN_IF_ERROR(res.qp.ToRtr(peer, mtu, config.port, device->status().gid.index));
  MCDMA_RETURN_IF_ERROR(res.qp.ToRts(local.psn));
  // Caps: this device's, at the stricter of both ends' limits.
  Caps caps = device->caps();
  caps.profile = StricterProfile(local.profile, remote.profile);
  uint32_t sq_limit = std::min(local.max_outstanding, remote.max_outstanding);
  caps.max_outstanding = sq_limit - 1;  // one entry kept for CREDIT messages
  caps.one_sided = caps.one_sided && !remote.unreliable;
  caps.max_outstanding_reads = std::min(local.max_reads, remote.max_reads);
  caps.max_read_bytes = std::min(local.max_read_bytes, remote.max_read_bytes);
  caps.max_transfer_bytes = std::min(local.max_transfer_bytes, remote.max_transfer_bytes);
  caps.max_message_bytes = remote.slot_bytes - kWireHeaderBytes;
  if (!caps.one_sided) {
    // Streamed over SENDs (verbs_stream.cpp): bounded per request, a few
    // READs answered at a time.
    caps.max_transfer_bytes = caps.max_read_bytes = 4ull << 20;
    caps.max_outstanding_reads = 4;
  }
  auto conn =
      std::make_unique<ConnectionImpl>(device, std::move(res), remote, std::move(caps), sq_limit);
  MCDMA_RETURN_IF_ERROR(conn->Start());
  return std::unique_ptr<Connection>(std::move(conn));
}

}  // namespace mcdma::driver::verbs
