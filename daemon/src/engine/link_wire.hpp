// Messages on a data link: what one daemon's engine SENDs into the receive
// slots its peer's engine posted. Each SEND carries one fragment: a 56-byte
// header and up to (slot_bytes - 56) bytes of the message's payload. A
// message larger than one slot is cut into fragments that are posted back to
// back on one rail, so they arrive contiguous and in order (the transport
// keeps SEND order); anything else is a protocol error that takes the link
// down. Every message but kAck and the rail probes carries a sequence
// number of its link, and
// every fragment the sender's cumulative acknowledgement of the messages it
// received: a message sent on a rail that failed is sent again on another
// and delivered once. Byte layout and rules: docs/protocol.md, "Data-link
// messages".
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

namespace mcdma::daemon::link_wire {

inline constexpr uint32_t kMagic = 0x4C44434D;  // "MCDL" read as little-endian bytes
inline constexpr uint8_t kVersion = 2;
inline constexpr size_t kHeaderBytes = 56;
// The largest message payload a peer may announce (a call or reply is also
// bounded by the receiving app's arena).
inline constexpr uint32_t kMaxMessageBytes = 256u << 20;

enum class MsgType : uint8_t {
  kCall = 1,       // id: caller's call id; target: callee's service id
  kNotify = 2,     // id: caller's op id (acknowledged by a kReply); target: service id
  kReply = 3,      // id: the call/notify id; status, reason: the result; payload: reply or message
  kRevoke = 4,     // target: an export id the sender revoked
  kEcho = 5,       // id: sequence; payload echoed back in a kEchoReply
  kEchoReply = 6,  // id: the kEcho's sequence; payload: the kEcho's
  // target: an export id the receiver revoked (kRevoke); sent once none of
  // the sender's transfers to it is still posted, so the receiver may
  // deregister its memory without a late RDMA access failing the link.
  kRevokeAck = 7,
  // No payload, no sequence number: only the header's ack (sent when the
  // receiver has acknowledged nothing for a while; others carry it too).
  kAck = 8,
  // Rail probes (docs/protocol.md §15.5): no payload, no sequence number,
  // on the rail being probed only. A rail carries traffic once the
  // kRailProbeAck of its kRailProbe came back over it.
  kRailProbe = 9,
  kRailProbeAck = 10,
  // A message for or from a host this link's peer is not: the payload is
  // a route header (route_wire.hpp) and a whole message of the routed
  // link between the two ends (docs/protocol.md §20). Relays forward it.
  kRouted = 11,
  // Routed links only: a service lookup (payload: the name; id: the
  // request) and its answer (status, reason; target: the service id;
  // payload: the answering daemon's instance id, or the error's message).
  kLookup = 12,
  kLookupReply = 13,
  // Routed links only (docs/protocol.md §20.1): an export resolved in-band
  // (payload: the name; id: the request) and its answer (status, reason;
  // target: the export id; payload: route_wire::ExportAnswer, or the
  // error's message).
  kResolve = 14,
  kResolveReply = 15,
  // Routed links only: one piece of a READ or WRITE (id: the origin's op;
  // target: the export id; payload: route_wire::PieceHead, then a WRITE's
  // bytes) and its answer (id: the op; status, reason; payload: a
  // PieceHead, then a READ's bytes or the error's message).
  kPiece = 16,
  kPieceReply = 17,
  kMaxType = 17,
};

// Traced calls (docs/protocol.md, "Traced calls"): a kCall whose `reason`
// has this bit asks the peer to time its part; a kReply with it set carries
// those times, `timeout_us` = ns from the call received whole to the reply
// posted (at most 2^32 - 1), `target` = ns of that the serving app had the
// call. Bit 31 is no Reason's: reasons are small numbers.
inline constexpr uint32_t kTraceBit = 1u << 31;

// Little-endian on the wire, whatever the host's order.
struct Header {
  uint32_t magic = kMagic;
  uint8_t version = kVersion;
  MsgType type = MsgType::kCall;
  uint16_t status = 0;     // kReply: a mcdma::Code
  uint32_t total_len = 0;  // payload bytes of the whole message
  uint32_t frag_off = 0;   // where this fragment's payload starts in the message
  uint64_t id = 0;
  uint64_t target = 0;
  uint32_t timeout_us = 0;  // kCall/kNotify: time left before the caller's deadline
  uint32_t reason = 0;      // kReply: a mcdma::Reason (0, NONE, from a peer that predates them)
  uint64_t seq = 0;         // the message's sequence number on its link, from 1; kAck: 0
  uint64_t ack = 0;         // every message up to this one from the peer was received
};

namespace detail {
template <typename T>
void Put(std::byte* out, size_t off, T v) {
  for (size_t i = 0; i < sizeof(T); ++i)
    out[off + i] = static_cast<std::byte>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff);
}
template <typename T>
T Get(const std::byte* in, size_t off) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i)
    v |= static_cast<uint64_t>(std::to_integer<uint8_t>(in[off + i])) << (8 * i);
  return static_cast<T>(v);
}
}  // namespace detail

inline void Encode(const Header& h, std::byte* out) {
  detail::Put<uint32_t>(out, 0, h.magic);
  detail::Put<uint8_t>(out, 4, h.version);
  detail::Put<uint8_t>(out, 5, static_cast<uint8_t>(h.type));
  detail::Put<uint16_t>(out, 6, h.status);
  detail::Put<uint32_t>(out, 8, h.total_len);
  detail::Put<uint32_t>(out, 12, h.frag_off);
  detail::Put<uint64_t>(out, 16, h.id);
  detail::Put<uint64_t>(out, 24, h.target);
  detail::Put<uint32_t>(out, 32, h.timeout_us);
  detail::Put<uint32_t>(out, 36, h.reason);
  detail::Put<uint64_t>(out, 40, h.seq);
  detail::Put<uint64_t>(out, 48, h.ack);
}

// Decodes one fragment of `len` bytes; nullopt with `why` set when it breaks
// a rule that needs no link state (magic, version, type, sizes).
// Messages outside the link's sequence: acks and rail probes (header only).
constexpr bool Unsequenced(uint8_t type) {
  return type == static_cast<uint8_t>(MsgType::kAck) ||
         type == static_cast<uint8_t>(MsgType::kRailProbe) ||
         type == static_cast<uint8_t>(MsgType::kRailProbeAck);
}

inline std::optional<Header> Decode(const std::byte* in, size_t len, std::string* why) {
  if (len < kHeaderBytes) {
    *why = "fragment of " + std::to_string(len) + " bytes is shorter than the header";
    return std::nullopt;
  }
  Header h;
  h.magic = detail::Get<uint32_t>(in, 0);
  h.version = detail::Get<uint8_t>(in, 4);
  uint8_t type = detail::Get<uint8_t>(in, 5);
  h.status = detail::Get<uint16_t>(in, 6);
  h.total_len = detail::Get<uint32_t>(in, 8);
  h.frag_off = detail::Get<uint32_t>(in, 12);
  h.id = detail::Get<uint64_t>(in, 16);
  h.target = detail::Get<uint64_t>(in, 24);
  h.timeout_us = detail::Get<uint32_t>(in, 32);
  h.reason = detail::Get<uint32_t>(in, 36);
  h.seq = detail::Get<uint64_t>(in, 40);
  h.ack = detail::Get<uint64_t>(in, 48);
  if (h.magic != kMagic) {
    *why = "bad magic";
  } else if (h.version != kVersion) {
    *why = "unsupported message version " + std::to_string(h.version);
  } else if (type == 0 || type > static_cast<uint8_t>(MsgType::kMaxType)) {
    *why = "unknown message type " + std::to_string(type);
  } else if (h.total_len > kMaxMessageBytes) {
    *why = "message of " + std::to_string(h.total_len) + " bytes is over the limit";
  } else if (h.frag_off > h.total_len || len - kHeaderBytes > h.total_len - h.frag_off) {
    *why = "fragment runs past its message's length";
  } else if (len == kHeaderBytes && h.total_len != 0) {
    *why = "empty fragment of a non-empty message";
  } else if (Unsequenced(type) != (h.seq == 0)) {
    *why = Unsequenced(type) ? "an ack or probe with a sequence number"
                             : "a message without a sequence number";
  } else if (Unsequenced(type) && h.total_len != 0) {
    *why = "an ack or probe with a payload";
  } else {
    h.type = static_cast<MsgType>(type);
    return h;
  }
  return std::nullopt;
}

}  // namespace mcdma::daemon::link_wire
