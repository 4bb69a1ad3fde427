// Wire: the I/O thread's half of one tcp connection — what a NIC's queue
// pair would hold. It turns the engine's requests into frames, parses the
// peer's frames, applies one-sided frames to registered memory, and hands
// completions to the engine through the connection's ConnShared.
//
// Requester side: SEND/WRITE/READ requests are kept in post order
// (inflight_). They are issued as frames in that order; a SEND waits for a
// credit (one per RECV the peer posted) and holds up everything behind it,
// as a verbs send queue stalls on receiver-not-ready. A SEND completes when
// its last byte is handed to the kernel, a WRITE on its WRITE_ACK, a READ
// when its READ_RESP payload has landed. Completions are released in post
// order, as a verbs send queue reports them.
//
// Responder side: WRITE payloads are received straight into the target
// region and READ_RESP payloads sent straight from it, under the registry's
// per-call pins; a frame whose target is refused is received into scratch
// and dropped. Outgoing frames wait in one FIFO (out_), written with
// sendmsg(iovec...) and partial-write bookkeeping; incoming bytes are read
// with readv into the current payload's destination plus a staging buffer
// that catches the next headers, so bulk data is copied once, by the kernel.
//
// A region deregistered while a frame that reads it is queued makes the
// frame go out as an abort (status, no payload) if its header has not been
// sent yet; if it vanishes in the middle of the frame's payload, the
// connection goes down (as a verbs QP moves to the error state).
//
// Threading: owned by the I/O thread; nothing here is touched by another.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "driver/tcp/tcp_frame.hpp"
#include "driver/tcp/tcp_registry.hpp"
#include "driver/tcp/tcp_shared.hpp"
#include "driver/tcp/tcp_socket.hpp"

namespace mcdma::driver::tcp {

// What every Wire of one I/O thread shares.
struct WireContext {
  Registry& registry;
  std::vector<std::byte> scratch;  // where refused payload bytes go
  bool notify = false;             // a completion was delivered since the last notify
};

class Wire {
 public:
  Wire(Fd fd, std::shared_ptr<ConnShared> shared, WireContext& ctx);
  Wire(const Wire&) = delete;
  Wire& operator=(const Wire&) = delete;

  int fd() const { return fd_.get(); }
  bool dead() const { return dead_; }
  // Whether frames wait for the socket to become writable.
  bool wants_output() const { return !dead_ && !out_.empty(); }
  // Whether the I/O thread asked its poller to report this socket writable.
  bool watching_output = false;

  // A request the engine posted (in post order); on a dead wire it
  // completes kLinkDown at once.
  void Enqueue(const Request& request);
  // After Enqueue calls: grant credits for new RECVs, issue what may go,
  // write what the socket takes.
  void Progress();
  // The socket is readable (or hung up): reads and handles frames until it
  // would block or a budget is spent, then writes any answers.
  void OnReadable();
  // The socket is writable.
  void Flush();
  // Takes the connection down: everything outstanding completes kLinkDown
  // (in post order), the engine's later posts fail, the socket is to close.
  void Fail(const std::string& detail);
  // The engine destroyed its Connection: tells the peer (CLOSE, if at a
  // frame boundary) without delivering anything.
  void Abandon();

 private:
  // A SEND/WRITE/READ from post until its completion is released.
  struct Inflight {
    Request request;
    uint64_t seq = 0;
    bool done = false;
    Code code = Code::kOk;
    uint32_t byte_len = 0;
    std::string detail;
  };
  struct Recv {
    uint64_t wr_id = 0;
    uint64_t region_id = 0;
    uint64_t offset = 0;
    uint64_t length = 0;
  };
  struct OutFrame {
    FrameHeader header;
    HeaderBytes encoded{};
    uint32_t header_sent = 0;
    uint64_t region_id = 0;  // payload source (when length > 0 and no inline payload)
    uint64_t offset = 0;
    uint64_t payload_sent = 0;
    std::vector<std::byte> inline_payload;  // CREDIT
    bool completes_send = false;            // SEND: complete request `seq` once written
    uint64_t seq = 0;
    bool answer = false;  // WRITE_ACK / READ_RESP (counts against kMaxQueuedAnswers)
  };
  enum class Sink : uint8_t { kDiscard, kMemory, kInline };
  // The frame whose payload is being received.
  struct RxFrame {
    FrameHeader header;
    uint64_t remaining = 0;
    Sink sink = Sink::kDiscard;
    uint64_t region_id = 0;  // kMemory: where the next byte goes
    uint64_t offset = 0;
    uint64_t seq = 0;       // READ_RESP: the READ it answers
    Code code = Code::kOk;  // the frame's outcome so far
    std::string detail;
    std::vector<std::byte> inline_bytes;
  };

  // Requester (tcp_wire.cpp).
  void Issue();
  void CompleteInflight(uint64_t seq, Code code, uint64_t bytes, std::string detail);
  void CompleteRecv(Code code, uint64_t bytes, std::string detail);
  void Deliver(WorkCompletion wc);
  void QueueFrame(OutFrame frame);
  void GrantCredits();
  Inflight* AwaitedAnswer(const FrameHeader& header, WorkOp op);

  // Receive path (tcp_wire_rx.cpp).
  bool ParseStaged();
  void OnHeader(const FrameHeader& header);
  void OnSendHeader(const FrameHeader& header);
  void OnWriteHeader(const FrameHeader& header);
  void OnReadReq(const FrameHeader& header);
  void OnWriteAck(const FrameHeader& header);
  void OnReadRespHeader(const FrameHeader& header);
  void OnPayloadDone();
  void TakePayload(const std::byte* bytes, uint64_t n);
  void SinkGone();
  ssize_t ReadMore();
  void Violation(const std::string& what);

  // Send path (tcp_wire_tx.cpp).
  bool PrepareIov(OutFrame& frame, std::vector<iovec>& iov);
  void Advance(uint64_t bytes);
  void OnWritten(OutFrame& frame);

  Fd fd_;
  std::shared_ptr<ConnShared> shared_;
  WireContext& ctx_;
  bool dead_ = false;

  std::deque<Inflight> inflight_;  // post order; front has seq base_seq_
  uint64_t base_seq_ = 1;
  size_t issue_idx_ = 0;           // inflight_[issue_idx_] is the next to issue
  std::deque<uint64_t> awaiting_;  // seqs of issued WRITE/READs awaiting answers
  std::deque<uint32_t> credits_;   // the peer's RECV lengths, oldest first

  std::deque<Recv> recv_queue_;        // posted RECVs, oldest first
  std::vector<uint32_t> new_credits_;  // RECV lengths not yet announced

  std::deque<OutFrame> out_;
  uint64_t answers_queued_ = 0;
  std::vector<iovec> iov_;  // reused by Flush
  std::vector<Pin> pins_;   // held across one sendmsg / readv only

  std::vector<std::byte> staging_;
  size_t staged_begin_ = 0;
  size_t staged_end_ = 0;
  bool in_payload_ = false;
  RxFrame rx_;
};

}  // namespace mcdma::driver::tcp
