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

}  // namespace mcdma::daemon::route_wire
