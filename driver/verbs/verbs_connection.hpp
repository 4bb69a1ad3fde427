// Private to the verbs transport: one connection (verbs_transport.hpp says
// how it works). Messaging, posting and completions are in
// verbs_connection.cpp; one-sided operations streamed over SENDs, for
// profiles without RDMA READ/WRITE, in verbs_stream.cpp.
#pragma once

#include <deque>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "driver/verbs/verbs_internal.hpp"

namespace mcdma::driver::verbs {

class ConnectionImpl final : public Connection {
 public:
  ConnectionImpl(DeviceImpl* device, QpResources res, const EndpointInfo& remote, Caps caps,
                 uint32_t sq_limit);
  ~ConnectionImpl() override;

  const Caps& caps() const override { return caps_; }
  uint32_t outstanding() const override { return outstanding_; }
  // Posts the receive ring and says HELLO.
  Status Start();

  Status PostSend(uint64_t wr_id, const LocalSlice& src) override;
  Status PostRecv(uint64_t wr_id, const LocalSlice& dst) override;
  Status PostWrite(uint64_t wr_id, const LocalSlice& src, const RemoteSlice& dst) override;
  Status PostRead(uint64_t wr_id, const LocalSlice& dst, const RemoteSlice& src) override;
  size_t Poll(std::span<WorkCompletion> out) override;
  bool ArmWakeup() override;

 private:
  struct Request {
    enum Kind : uint8_t { kSend, kWrite, kRead } kind;
    uint64_t wr_id;
    LocalSlice local;
    RemoteSlice remote;
  };
  // A send queue entry: a caller's request, or one of ours (HELLO, CREDIT,
  // a streamed chunk or answer).
  struct SqEntry {
    bool internal = false;
    uint64_t wr_id = 0;
    WorkOp op = WorkOp::kSend;
    uint32_t bytes = 0;
  };
  struct UserRecv {
    uint64_t wr_id;
    LocalSlice dst;
  };
  struct Arrived {
    uint32_t slot;
    uint32_t length;
  };
  // A streamed operation of ours waiting for its answer.
  struct Stream {
    uint64_t wr_id = 0;
    WorkOp op = WorkOp::kWrite;
    LocalSlice local;
    uint32_t received = 0;  // READ: bytes in so far
  };
  // What we owe the peer for its streamed operations: an ACK, or the
  // chunks of a READ (from `region`, or refused with `status`).
  struct Answer {
    WireType type = WireType::kWriteAck;
    OpHeader op;
    const VerbsRegion* region = nullptr;
    uint32_t sent = 0;
  };

  // ---- verbs_connection.cpp ----
  Status CheckUsable(const char* op, const LocalSlice& s) const;
  Status Queue(const Request& r);
  uint32_t Credits() const;
  uint32_t SqUsed() const;
  bool CanSendMessage() const;  // a credit-counted SEND may go now
  void Pump();
  std::byte* HeaderFor(uint32_t idx) const;
  // Takes a send queue entry and posts `wr` with `sge` (header first).
  void PostOnQueue(ibv_send_wr& wr, const SqEntry& e, uint64_t read_bytes);
  void PostRequest(const Request& r);
  void PostControl(WireType type);
  void Issue(ibv_send_wr& wr, uint64_t read_bytes, uint64_t send_bytes);
  Status PostRing(uint32_t slot);
  void Repost(uint32_t slot, bool counts);
  // Reaps the CQ into the connection's state; how many completions it took.
  int ReapCq();
  void Handle(const ibv_wc& wc);
  void HandleRecv(const ibv_wc& wc, uint32_t slot);
  void Deliver();
  void CheckAsync();
  void Fail(const std::string& why, bool flush = false);
  void FlushSoftware();

  // ---- verbs_stream.cpp ----
  // Posts what it can of the streamed request at the queue's front; true
  // when all of it is on the wire (it then waits in streams_).
  bool PumpStreamed(const Request& r);
  // Sends what it can of answers_.
  void PumpAnswers();
  // A WRITE_DATA / WRITE_ACK / READ_REQ / READ_DATA from the peer; the
  // slot is reposted here.
  void HandleStreamed(const WireHeader& h, uint32_t slot);
  uint32_t ChunkBytes() const;  // data bytes per streamed SEND
  // One credit-counted SEND of a streamed operation: wire and op headers,
  // then `n` bytes at `data` (lkey `lkey`) when n > 0.
  void PostStreamSend(WireType type, const OpHeader& op, const std::byte* data, uint32_t lkey,
                      uint32_t n);

  DeviceImpl* device_;
  QpResources res_;
  EndpointInfo remote_;
  Caps caps_;
  uint32_t sq_limit_;
  std::vector<SqEntry> sq_;
  std::vector<uint32_t> sq_free_;
  uint32_t user_in_sq_ = 0;
  uint32_t reads_out_ = 0;
  std::deque<Request> queued_;
  uint32_t front_sent_ = 0;  // bytes of a streamed WRITE at the front already sent
  uint32_t front_op_ = 0;    // its op id; 0 before its first chunk
  std::deque<UserRecv> user_recvs_;
  std::deque<Arrived> arrived_;
  std::deque<WorkCompletion> ready_;
  uint32_t outstanding_ = 0;
  std::map<uint32_t, Stream> streams_;  // by op id
  uint32_t next_op_ = 1;
  std::deque<Answer> answers_;
  std::map<uint32_t, uint32_t> write_status_;  // a peer's WRITE refused: op id -> Code
  // Credits (running counts modulo 2^32).
  uint32_t posted_ = 0;       // our ring slots posted for messages other than HELLO
  uint32_t reported_ = 0;     // posted_ as last told to the peer
  uint32_t peer_posted_ = 0;  // the peer's, as it last told us
  uint32_t consumed_ = 0;     // credit-counted messages we sent
  bool hello_due_ = false;
  bool hello_reply_due_ = false;
  bool hello_seen_ = false;
  bool down_ = false;
  bool down_by_flush_ = false;
  std::string down_reason_;
  uint64_t async_epoch_ = 0;
};

}  // namespace mcdma::driver::verbs
