// The routed envelope: a kRouted data-link message carries a message of a
// routed link (two hosts without a link of their own) from one daemon to
// the next on its route. Layout of the kRouted payload (little-endian):
//
//   0   u8   version (1)
//   1   u8   hops: links crossed before this one (0 from the origin)
//   2   u8   origin id length O (1..64)
//   3   u8   destination id length D (1..64)
//   4   u8   origin instance length I (0..64)
//   5   u8   destination instance length J (0..64; 0: not known yet)
//   6   u16  reserved (0)
//   8   u64  sender epoch: the origin's routed link this message belongs
//            to (new links have larger epochs)
//   16  u64  ack epoch: the destination's routed link the inner header's
//            `ack` refers to (0: none yet)
//   24  O bytes origin host id, D bytes destination host id, I bytes the
//       origin daemon's instance id, J bytes the destination's as the
//       origin knows it (a message for an earlier instance is dropped)
//   ..  56-byte data-link header of the inner message (link_wire.hpp),
//       then its payload (the inner header's total_len bytes, whole: a
//       routed message is never cut into fragments of its own)
//
// Rules a daemon checks (docs/protocol.md §20): a header that does not
// parse, host ids that are not valid, an inner message that is itself
// kRouted or a rail probe, or an inner length that is not the rest of the
// payload take the link the envelope came on down as a protocol error.
// A relay drops a message that has crossed kMaxHops links already (hops +
// 1 >= kMaxHops on arrival: a loop or a stale route), and one that names
// this host as its origin.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "engine/link_wire.hpp"

namespace mcdma::daemon::route_wire {

inline constexpr uint8_t kVersion = 1;
inline constexpr uint8_t kMaxHops = 4;
inline constexpr size_t kMaxHostBytes = 64;
// The most an envelope adds to its inner message.
inline constexpr size_t kFixedBytes = 24;
inline constexpr size_t kOverhead = kFixedBytes + 4 * kMaxHostBytes + link_wire::kHeaderBytes;

struct Envelope {
  uint8_t hops = 0;
  std::string origin;
  std::string dest;
  std::string origin_instance;
  std::string dest_instance;
  uint64_t sender_epoch = 0;
  uint64_t ack_epoch = 0;
  link_wire::Header inner;
  std::span<const std::byte> payload;  // into the decoded buffer
};

inline std::string Encode(uint8_t hops, std::string_view origin, std::string_view dest,
                          std::string_view origin_instance, std::string_view dest_instance,
                          uint64_t sender_epoch, uint64_t ack_epoch, const link_wire::Header& inner,
                          std::span<const std::byte> payload) {
  std::string out;
  const size_t head =
      kFixedBytes + origin.size() + dest.size() + origin_instance.size() + dest_instance.size();
  out.resize(head + link_wire::kHeaderBytes + payload.size());
  auto* p = reinterpret_cast<std::byte*>(out.data());
  p[0] = std::byte{kVersion};
  p[1] = std::byte{hops};
  p[2] = std::byte{static_cast<uint8_t>(origin.size())};
  p[3] = std::byte{static_cast<uint8_t>(dest.size())};
  p[4] = std::byte{static_cast<uint8_t>(origin_instance.size())};
  p[5] = std::byte{static_cast<uint8_t>(dest_instance.size())};
  p[6] = p[7] = std::byte{0};
  link_wire::detail::Put<uint64_t>(p, 8, sender_epoch);
  link_wire::detail::Put<uint64_t>(p, 16, ack_epoch);
  size_t at = kFixedBytes;
  for (std::string_view part : {origin, dest, origin_instance, dest_instance}) {
    if (!part.empty()) std::memcpy(p + at, part.data(), part.size());
    at += part.size();
  }
  link_wire::Header h = inner;
  h.total_len = static_cast<uint32_t>(payload.size());
  h.frag_off = 0;
  link_wire::Encode(h, p + at);
  at += link_wire::kHeaderBytes;
  if (!payload.empty()) std::memcpy(p + at, payload.data(), payload.size());
  return out;
}

// Sets byte 1 (hops) of an encoded envelope.
inline void SetHops(std::string& encoded, uint8_t hops) {
  if (encoded.size() > 1) encoded[1] = static_cast<char>(hops);
}

namespace detail {
inline bool ValidHost(std::string_view id) {
  if (id.empty() || id.size() > kMaxHostBytes) return false;
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}
}  // namespace detail

// nullopt with `why` for an envelope that breaks the rules above.
inline std::optional<Envelope> Decode(std::span<const std::byte> in, std::string* why) {
  if (in.size() < kFixedBytes) {
    *why = "routed message shorter than its route header";
    return std::nullopt;
  }
  const auto u8 = [&](size_t i) { return std::to_integer<uint8_t>(in[i]); };
  if (u8(0) != kVersion) {
    *why = "routed message of version " + std::to_string(u8(0));
    return std::nullopt;
  }
  Envelope e;
  e.hops = u8(1);
  const size_t o = u8(2), d = u8(3), oi = u8(4), di = u8(5);
  const size_t head = kFixedBytes + o + d + oi + di;
  e.sender_epoch = link_wire::detail::Get<uint64_t>(in.data(), 8);
  e.ack_epoch = link_wire::detail::Get<uint64_t>(in.data(), 16);
  if (in.size() < head + link_wire::kHeaderBytes) {
    *why = "routed message shorter than its route header";
    return std::nullopt;
  }
  const char* text = reinterpret_cast<const char*>(in.data());
  const char* at = text + kFixedBytes;
  e.origin.assign(at, o);
  e.dest.assign(at + o, d);
  e.origin_instance.assign(at + o + d, oi);
  e.dest_instance.assign(at + o + d + oi, di);
  if (e.sender_epoch == 0) {
    *why = "routed message without a sender epoch";
    return std::nullopt;
  }
  if (!detail::ValidHost(e.origin) || !detail::ValidHost(e.dest) ||
      e.origin_instance.size() > kMaxHostBytes || e.dest_instance.size() > kMaxHostBytes) {
    *why = "routed message with an invalid host or instance id";
    return std::nullopt;
  }
  std::span<const std::byte> rest = in.subspan(head);
  auto h = link_wire::Decode(rest.data(), rest.size(), why);
  if (!h) {
    *why = "routed message: " + *why;
    return std::nullopt;
  }
  if (h->frag_off != 0 || rest.size() - link_wire::kHeaderBytes != h->total_len) {
    *why = "routed message whose inner length is not the rest of its payload";
    return std::nullopt;
  }
  if (h->type == link_wire::MsgType::kRouted || h->type == link_wire::MsgType::kRailProbe ||
      h->type == link_wire::MsgType::kRailProbeAck) {
    *why = "routed message carrying a message that is never routed";
    return std::nullopt;
  }
  e.inner = *h;
  e.payload = rest.subspan(link_wire::kHeaderBytes);
  return e;
}

// ---- Routed transfers (docs/protocol.md §20.1) ------------------------------

// The largest piece of a routed READ or WRITE: each piece is one routed
// message, forwarded by every relay as soon as it arrived whole (pieces
// of one transfer cross the route back to back: cut-through by piece).
inline constexpr uint64_t kMaxPieceBytes = 256u << 10;
inline constexpr size_t kPieceHeadBytes = 24;

// At the start of a kPiece and of a kPieceReply (little-endian):
//   0   u8   kind: 1 WRITE (the piece's bytes follow), 2 READ
//   1   u8[7] reserved (0)
//   8   u64  offset into the export
//   16  u64  length of the piece (1..kMaxPieceBytes)
// A kPiece is exactly the head plus `length` bytes (WRITE) or the head
// alone (READ). A kPieceReply with status OK is the head plus `length`
// bytes (READ) or the head alone (WRITE); with an error, the head and the
// error's message.
enum class PieceKind : uint8_t { kWrite = 1, kRead = 2 };
struct PieceHead {
  PieceKind kind = PieceKind::kWrite;
  uint64_t offset = 0;
  uint64_t length = 0;
};

inline void EncodePieceHead(const PieceHead& p, std::byte* out) {
  out[0] = std::byte{static_cast<uint8_t>(p.kind)};
  for (size_t i = 1; i < 8; ++i) out[i] = std::byte{0};
  link_wire::detail::Put<uint64_t>(out, 8, p.offset);
  link_wire::detail::Put<uint64_t>(out, 16, p.length);
}

// nullopt with `why` for a head that breaks the rules above (the payload's
// length is checked by the caller, which knows the message).
inline std::optional<PieceHead> DecodePieceHead(std::span<const std::byte> in, std::string* why) {
  if (in.size() < kPieceHeadBytes) {
    *why = "transfer piece shorter than its head";
    return std::nullopt;
  }
  PieceHead p;
  const auto kind = std::to_integer<uint8_t>(in[0]);
  if (kind != static_cast<uint8_t>(PieceKind::kWrite) &&
      kind != static_cast<uint8_t>(PieceKind::kRead)) {
    *why = "transfer piece of unknown kind " + std::to_string(kind);
    return std::nullopt;
  }
  p.kind = static_cast<PieceKind>(kind);
  p.offset = link_wire::detail::Get<uint64_t>(in.data(), 8);
  p.length = link_wire::detail::Get<uint64_t>(in.data(), 16);
  if (p.length == 0 || p.length > kMaxPieceBytes) {
    *why = "transfer piece of " + std::to_string(p.length) + " bytes";
    return std::nullopt;
  }
  return p;
}

// A kResolveReply's payload when the export was found (little-endian):
//   0   u64  length of the export
//   8   u8   rights: 1 READ, 2 WRITE (or both)
//   9   u8[7] reserved (0)
//   16  u64  milliseconds until it expires (0: no TTL)
//   24  the answering daemon's instance id (1..64 bytes)
inline constexpr size_t kExportAnswerBytes = 24;
struct ExportAnswer {
  uint64_t length = 0;
  bool allow_read = false;
  bool allow_write = false;
  uint64_t expires_in_ms = 0;
  std::string instance;
};

inline std::string EncodeExportAnswer(const ExportAnswer& a) {
  std::string out(kExportAnswerBytes + a.instance.size(), '\0');
  auto* p = reinterpret_cast<std::byte*>(out.data());
  link_wire::detail::Put<uint64_t>(p, 0, a.length);
  p[8] = std::byte{static_cast<uint8_t>((a.allow_read ? 1 : 0) | (a.allow_write ? 2 : 0))};
  link_wire::detail::Put<uint64_t>(p, 16, a.expires_in_ms);
  std::memcpy(p + kExportAnswerBytes, a.instance.data(), a.instance.size());
  return out;
}

inline std::optional<ExportAnswer> DecodeExportAnswer(std::span<const std::byte> in,
                                                      std::string* why) {
  if (in.size() <= kExportAnswerBytes || in.size() > kExportAnswerBytes + kMaxHostBytes) {
    *why = "an export's description of " + std::to_string(in.size()) + " bytes";
    return std::nullopt;
  }
  ExportAnswer a;
  a.length = link_wire::detail::Get<uint64_t>(in.data(), 0);
  const auto rights = std::to_integer<uint8_t>(in[8]);
  a.allow_read = (rights & 1) != 0;
  a.allow_write = (rights & 2) != 0;
  a.expires_in_ms = link_wire::detail::Get<uint64_t>(in.data(), 16);
  a.instance.assign(reinterpret_cast<const char*>(in.data()) + kExportAnswerBytes,
                    in.size() - kExportAnswerBytes);
  if (a.length == 0 || (rights & ~3) != 0) {
    *why = "an export's description with length " + std::to_string(a.length) + " and rights " +
           std::to_string(rights);
    return std::nullopt;
  }
  return a;
}

}  // namespace mcdma::daemon::route_wire
