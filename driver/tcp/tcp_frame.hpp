// The tcp transport's wire format, version 1: what two daemons' I/O threads
// exchange over one data connection. Enough to write a second implementation
// (this comment goes into docs/protocol.md).
//
// Integers are little-endian. A connection is one TCP stream (TCP_NODELAY);
// everything on it is a sequence of frames, each a fixed 40-byte header
// followed by `length` payload bytes (except READ_REQ, see below):
//
//   offset size field        meaning
//   0      4    magic        0x5054434d ("MCTP" as bytes on the wire)
//   4      1    version      1
//   5      1    type         FrameType below
//   6      2    flags        0 (no flags are defined; nonzero is a violation)
//   8      2    status       mcdma::Code (status.hpp) of a result or an
//                            abort; 0 = OK; > 15 is a violation. Nonzero only
//                            in SEND, WRITE, WRITE_ACK, READ_RESP
//   10     2    reserved     0
//   12     4    rkey         WRITE, READ_REQ: the target region's rkey
//   16     8    wr_id        request tag. SEND, WRITE, READ_REQ: the
//                            initiator's per-connection sequence number of the
//                            request (never the app's wr_id, which does not
//                            leave the host); WRITE_ACK, READ_RESP: the tag of
//                            the request answered
//   24     8    remote_addr  WRITE, READ_REQ: byte offset within the region
//   32     4    length       payload bytes that follow (READ_REQ: bytes asked)
//   36     4    reserved     0
//
// Fields a type does not use (rkey and remote_addr outside WRITE/READ_REQ,
// wr_id in HELLO/CREDIT/HEARTBEAT/CLOSE) must be 0. Frame types:
//
//   1 HELLO      handshake only, see below. Payload 32 bytes: the target
//                endpoint's 16-byte token, then the sender's.
//   2 SEND       one message. status 0: `length` payload bytes that land in
//                the receiver's oldest posted RECV; the sender spends one
//                credit and never sends more bytes than that credit allows.
//                status != 0 (kOutOfRange: larger than the credited RECV;
//                kPermissionDenied: the sender's region vanished before the
//                frame started): length 0; the RECV completes with it.
//   3 WRITE      one-sided write: `length` payload bytes for [remote_addr,
//                +length) of the region named by rkey. status != 0: the
//                initiator aborted it before the payload (length 0). The
//                responder checks rkey, kAccessRemoteWrite and bounds,
//                receives the payload straight into the region (or discards
//                it), then answers WRITE_ACK.
//   4 WRITE_ACK  status of the WRITE with the same wr_id; length 0.
//   5 READ_REQ   one-sided read of `length` bytes from [remote_addr,
//                +length) of the region named by rkey. No payload.
//   6 READ_RESP  status 0: exactly the requested number of bytes; otherwise
//                length 0 (kPermissionDenied: unknown rkey, no
//                kAccessRemoteRead, or the region vanished before the frame
//                started; kOutOfRange: range outside the region).
//   7 CREDIT     the sender posted RECVs: payload is one u32 per RECV, its
//                length in bytes, oldest first; each entry is one credit
//                (batched: every RECV posted since the last CREDIT).
//                length is a multiple of 4 in [4, 4096].
//   8 HEARTBEAT  length 0; ignored (defined for liveness; not sent by v1).
//   9 CLOSE      length 0; the sender is closing the connection on purpose.
//
// Ordering: the responder handles frames in stream order and queues its
// answers (WRITE_ACK, READ_RESP) in one FIFO with everything else it sends,
// so answers arrive in the order of the requests: an answer whose wr_id is
// not the oldest unanswered WRITE/READ_REQ is a violation.
//
// Handshake: LocalInfo() = "tcp1 <address> <port> <token>" (address: what
// peers dial, numeric or a name; port: decimal; token: 32 lowercase hex
// digits, 128 random bits). The side whose token is lower (bytewise) dials
// the other's address and sends HELLO{target = the acceptor's token, sender
// = its own}; the acceptor matches the target to one of its endpoints (else
// closes the socket), checks that the sender is the token its Connect was
// given, and answers HELLO{target = the dialer's token, sender = its own}.
// Nothing else is sent before the answer. Tokens travel over the daemons'
// authenticated peer channel, so presenting one is the authorization.
//
// After the handshake either side sends any frame at any time; CLOSE, EOF
// or a socket error ends the connection.
//
// Violations — bad magic, version, flags, status or reserved fields, an
// unknown type, a length the type does not allow, a SEND when no RECV is
// posted or larger than the oldest posted RECV, an answer that is not the
// expected one (or a READ_RESP whose length is not the READ's), HELLO after
// the handshake, more than 2^20 credits held, more than 2^16 answers
// queued unsent (the peer asks without reading) — take the connection down:
// every outstanding request completes kLinkDown. A responder-side refusal
// (rkey, access, bounds) is not a violation: it is answered with a status.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "mcdma/status.hpp"

namespace mcdma::driver::tcp {

inline constexpr uint32_t kFrameMagic = 0x5054434d;
inline constexpr uint8_t kFrameVersion = 1;
inline constexpr size_t kHeaderBytes = 40;
inline constexpr size_t kTokenBytes = 16;
inline constexpr uint32_t kHelloPayloadBytes = 2 * kTokenBytes;
inline constexpr uint32_t kMaxCreditFrameBytes = 4096;  // 1024 credits
inline constexpr uint64_t kMaxHeldCredits = 1u << 20;
inline constexpr uint64_t kMaxQueuedAnswers = 1u << 16;
static_assert(kMaxCreditFrameBytes % 4 == 0);

enum class FrameType : uint8_t {
  kHello = 1,
  kSend = 2,
  kWrite = 3,
  kWriteAck = 4,
  kReadReq = 5,
  kReadResp = 6,
  kCredit = 7,
  kHeartbeat = 8,
  kClose = 9,
};

const char* FrameTypeName(FrameType type);

struct FrameHeader {
  FrameType type = FrameType::kHeartbeat;
  Code status = Code::kOk;
  uint32_t rkey = 0;
  uint64_t wr_id = 0;
  uint64_t remote_addr = 0;
  uint32_t length = 0;
};

using HeaderBytes = std::array<std::byte, kHeaderBytes>;
using Token = std::array<uint8_t, kTokenBytes>;

HeaderBytes EncodeHeader(const FrameHeader& header);

// Decodes and checks what can be checked without connection state: magic,
// version, flags, reserved fields, the type, a known status, and that the
// length suits the type (payload-free types carry 0; CREDIT a multiple of 4
// up to kMaxCreditFrameBytes; HELLO exactly kHelloPayloadBytes; aborted
// SEND/WRITE and failed READ_RESP 0). On failure, says what was wrong.
Result<FrameHeader> DecodeHeader(const std::byte* bytes);

// Whether a payload of `length` bytes follows a header of this type.
inline bool HasPayload(const FrameHeader& header) { return header.type != FrameType::kReadReq; }

// The complete HELLO frame (header + payload) and its parse.
inline constexpr size_t kHelloFrameBytes = kHeaderBytes + kHelloPayloadBytes;
std::array<std::byte, kHelloFrameBytes> EncodeHello(const Token& target, const Token& sender);
struct Hello {
  Token target;
  Token sender;
};
Result<Hello> DecodeHello(const std::byte* bytes);

// Endpoint descriptions (Endpoint::LocalInfo): "tcp1 <address> <port> <hex>".
struct EndpointInfo {
  std::string address;
  uint16_t port = 0;
  Token token{};
};
std::string EncodeEndpointInfo(const EndpointInfo& info);
Result<EndpointInfo> ParseEndpointInfo(std::string_view text);

std::string TokenHex(const Token& token);
std::optional<Token> TokenFromHex(std::string_view hex);

// Little-endian helpers for CREDIT payloads.
void StoreLe32(std::byte* out, uint32_t value);
uint32_t LoadLe32(const std::byte* in);

}  // namespace mcdma::driver::tcp
