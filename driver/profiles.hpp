// Every transport's limits as one constexpr table: the loop and tcp
// defaults, and the verbs device profiles (linux-rc, mcdma-cx5, apple-tb5).
// A verbs profile's row is what the profile itself allows; the device's own
// limits still apply on top (verbs::ProfileCaps takes the stricter of both
// for each limit). The static_asserts below pin how the limits relate,
// which is what the transports and the daemon rely on when they size
// chunks, rings and queues from Caps.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "driver/transport.hpp"

namespace mcdma::driver {

inline constexpr uint64_t kKiB = 1ULL << 10;
inline constexpr uint64_t kMiB = 1ULL << 20;
inline constexpr uint64_t kGiB = 1ULL << 30;
inline constexpr uint64_t kTiB = 1ULL << 40;

// The numbers of a Caps, without its strings, so they can be constexpr.
// Every row names every field (see the Caps fields for their meaning).
struct Limits {
  std::string_view profile;
  bool one_sided;
  uint32_t max_outstanding;
  uint32_t max_outstanding_reads;
  uint64_t max_read_bytes;
  uint64_t max_transfer_bytes;
  uint64_t max_registration_bytes;
  uint32_t max_registrations;  // 0 = no limit (verbs: the device's)
  uint32_t max_queue_pairs;    // 0 = no limit (verbs: the device's)
  uint32_t max_inline_bytes;
};

// `limits` as the Caps a transport named `name` reports.
inline Caps ToCaps(const Limits& limits, std::string name) {
  return Caps{
      .name = std::move(name),
      .profile = std::string(limits.profile),
      .one_sided = limits.one_sided,
      .max_outstanding = limits.max_outstanding,
      .max_outstanding_reads = limits.max_outstanding_reads,
      .max_read_bytes = limits.max_read_bytes,
      .max_transfer_bytes = limits.max_transfer_bytes,
      .max_registration_bytes = limits.max_registration_bytes,
      .max_registrations = limits.max_registrations,
      .max_queue_pairs = limits.max_queue_pairs,
      .max_inline_bytes = limits.max_inline_bytes,
  };
}

// loop: permissive, one-sided; 1 GiB per request, 1 TiB per registration.
inline constexpr Limits kLoopLimits{.profile = "loop",
                                    .one_sided = true,
                                    .max_outstanding = 256,
                                    .max_outstanding_reads = 16,
                                    .max_read_bytes = kGiB,
                                    .max_transfer_bytes = kGiB,
                                    .max_registration_bytes = kTiB,
                                    .max_registrations = 0,
                                    .max_queue_pairs = 0,
                                    .max_inline_bytes = 0};

// tcp: 64 MiB per request (a frame's payload), 64 READs in flight.
inline constexpr Limits kTcpLimits{.profile = "tcp",
                                   .one_sided = true,
                                   .max_outstanding = 256,
                                   .max_outstanding_reads = 64,
                                   .max_read_bytes = 64 * kMiB,
                                   .max_transfer_bytes = 64 * kMiB,
                                   .max_registration_bytes = kTiB,
                                   .max_registrations = 0,
                                   .max_queue_pairs = 0,
                                   .max_inline_bytes = 0};

// The verbs device profiles. linux-rc allows what the verbs transport ever
// uses of a device (so on a device it is exactly the device's limits; its
// 256 inline bytes are asked for, and a device that refuses them gets QPs
// without inline data);
// mcdma-cx5 is the MCDMA ConnectX-5 macOS provider's; apple-tb5 is Apple's
// RDMA over Thunderbolt 5: UC, SEND/RECV only, at most 100 registrations of
// at most 0xfa0000 bytes, and about 10 queue pairs per device (a daemon
// with many peers on one Thunderbolt device runs out of QPs before
// anything else).
inline constexpr std::array<Limits, 3> kVerbsProfiles{{
    {.profile = "linux-rc",
     .one_sided = true,
     .max_outstanding = 1024,
     .max_outstanding_reads = 16,
     .max_read_bytes = kGiB,
     .max_transfer_bytes = kGiB,
     .max_registration_bytes = kTiB,
     .max_registrations = 0,
     .max_queue_pairs = 0,
     .max_inline_bytes = 256},
    {.profile = "mcdma-cx5",
     .one_sided = true,
     .max_outstanding = 31,
     .max_outstanding_reads = 1,
     .max_read_bytes = 2 * kMiB,
     .max_transfer_bytes = 4 * kMiB,
     .max_registration_bytes = 4 * kMiB,
     .max_registrations = 0,
     .max_queue_pairs = 0,
     .max_inline_bytes = 28},
    {.profile = "apple-tb5",
     .one_sided = false,
     .max_outstanding = 4095,
     .max_outstanding_reads = 0,
     .max_read_bytes = 0,
     .max_transfer_bytes = 0xfa0000,
     .max_registration_bytes = 0xfa0000,
     .max_registrations = 100,
     .max_queue_pairs = 10,
     .max_inline_bytes = 0},
}};

// The verbs profile named `name`, or null.
constexpr const Limits* FindVerbsProfile(std::string_view name) {
  for (const Limits& limits : kVerbsProfiles) {
    if (limits.profile == name) return &limits;
  }
  return nullptr;
}

// The largest page the daemon runs on (16 KiB on Apple silicon): it splits
// buffers into registrations of whole pages, so each must hold one.
inline constexpr uint64_t kLargestPageBytes = 16 * kKiB;
// A verbs receive ring slot is at least one 4 KiB frame, and a ring has up
// to max_outstanding slots (at most linux-rc's 1024) in one registration.
inline constexpr uint64_t kVerbsFrameBytes = 4 * kKiB;

// What must hold for any row; the static_asserts below name each failure.
constexpr bool WorkCanPass(const Limits& l) {
  return !l.profile.empty() && l.max_outstanding > 0 && l.max_transfer_bytes > 0 &&
         l.max_registration_bytes > 0;
}
// READs exactly when one-sided, with a nonzero size and count.
constexpr bool ReadsMatchOneSided(const Limits& l) {
  return l.one_sided ? (l.max_outstanding_reads > 0 && l.max_read_bytes > 0)
                     : (l.max_outstanding_reads == 0 && l.max_read_bytes == 0);
}
// One request fits a WorkCompletion's 32-bit byte_len, comes from one
// registration, a READ is no larger than a WRITE, inline SENDs are requests.
constexpr bool SizesNest(const Limits& l) {
  return l.max_transfer_bytes <= std::numeric_limits<uint32_t>::max() &&
         l.max_transfer_bytes <= l.max_registration_bytes &&
         l.max_read_bytes <= l.max_transfer_bytes && l.max_inline_bytes <= l.max_transfer_bytes &&
         l.max_registration_bytes >= kLargestPageBytes;
}
constexpr bool AllRows(bool (*rule)(const Limits&)) {
  if (!rule(kLoopLimits) || !rule(kTcpLimits)) return false;
  for (const Limits& limits : kVerbsProfiles) {
    if (!rule(limits)) return false;
  }
  return true;
}

static_assert(AllRows(WorkCanPass), "a profile no work could pass");
static_assert(AllRows(ReadsMatchOneSided), "READ limits disagree with one_sided");
static_assert(AllRows(SizesNest), "a profile whose size limits do not nest");
// verbs: one send-queue entry is kept for CREDIT messages, and a receive
// ring of max_outstanding frames fits one registration.
static_assert([] {
  for (const Limits& l : kVerbsProfiles) {
    if (l.max_outstanding < 2) return false;
    uint64_t ring =
        uint64_t{l.max_outstanding < 1024 ? l.max_outstanding : 1024} * kVerbsFrameBytes;
    if (ring > l.max_registration_bytes) return false;
  }
  return true;
}());
static_assert(FindVerbsProfile("linux-rc") == &kVerbsProfiles[0] &&
              FindVerbsProfile("none") == nullptr);

}  // namespace mcdma::driver
