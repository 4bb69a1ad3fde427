// Deterministic byte patterns shared by the test app and the tests, so that a
// process can verify bytes another process wrote without any side channel.
//
// The pattern for a seed is an infinite byte stream: byte `o` is byte (o % 8)
// (little-endian) of Word(seed, o / 8). A region that starts at byte `base`
// of the stream is filled/verified with the same `base`, so any slice of a
// buffer can be checked on its own.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace mcdma::itest {

// splitmix64's finalizer: a cheap bijective mixer.
inline uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

inline uint64_t PatternWord(uint64_t seed, uint64_t index) {
  return Mix(Mix(seed) ^ (index * 0xD1B54A32D192ED03ULL));
}

inline uint8_t PatternByte(uint64_t seed, uint64_t offset) {
  return static_cast<uint8_t>(PatternWord(seed, offset / 8) >> (8 * (offset % 8)));
}

// Fills [data, data + len) with the stream for `seed` from byte `base` on.
inline void FillPattern(std::byte* data, uint64_t len, uint64_t seed, uint64_t base = 0) {
  uint64_t i = 0;
  for (; i < len && (base + i) % 8 != 0; ++i) data[i] = std::byte{PatternByte(seed, base + i)};
  for (; i + 8 <= len; i += 8) {
    uint64_t w = PatternWord(seed, (base + i) / 8);
    std::memcpy(data + i, &w, 8);
  }
  for (; i < len; ++i) data[i] = std::byte{PatternByte(seed, base + i)};
}

struct VerifyResult {
  bool ok = true;
  uint64_t first_bad = 0;  // offset into the region of the first wrong byte
  uint64_t bad_bytes = 0;  // how many bytes are wrong
};

inline VerifyResult VerifyPattern(const std::byte* data, uint64_t len, uint64_t seed,
                                  uint64_t base = 0) {
  VerifyResult r;
  auto bad = [&](uint64_t off) {
    if (r.ok) r.first_bad = off;
    r.ok = false;
    ++r.bad_bytes;
  };
  uint64_t i = 0;
  for (; i < len && (base + i) % 8 != 0; ++i) {
    if (data[i] != std::byte{PatternByte(seed, base + i)}) bad(i);
  }
  for (; i + 8 <= len; i += 8) {
    uint64_t w = PatternWord(seed, (base + i) / 8);
    uint64_t got;
    std::memcpy(&got, data + i, 8);
    if (got != w) {
      for (uint64_t b = 0; b < 8; ++b) {
        if (static_cast<uint8_t>(got >> (8 * b)) != static_cast<uint8_t>(w >> (8 * b))) bad(i + b);
      }
    }
  }
  for (; i < len; ++i) {
    if (data[i] != std::byte{PatternByte(seed, base + i)}) bad(i);
  }
  return r;
}

// ---- call payloads ----
// A request is identified by (seed, pid, thread, seq): its size is derived
// from them, its first 16 bytes are {thread u32, pid u32, seq u64} (cut to
// the size), and the rest is the pattern of a seed derived from all four, so
// a reply that belongs to another request (or another process) differs.
inline uint64_t CallSeed(uint64_t seed, uint32_t pid, uint32_t thread, uint64_t seq) {
  return Mix(seed ^ Mix((uint64_t{pid} << 32) | thread) ^ Mix(seq + 0x5851F42D4C957F2DULL));
}

inline uint64_t CallSize(uint64_t seed, uint32_t pid, uint32_t thread, uint64_t seq,
                         uint64_t max_size) {
  uint64_t r = Mix(CallSeed(seed, pid, thread, seq) ^ 0xA5A5A5A5ULL);
  // Make the edges (empty, one byte, the maximum) show up regularly.
  switch (seq % 97) {
    case 0:
      return 0;
    case 1:
      return std::min<uint64_t>(1, max_size);
    case 2:
      return max_size;
    default:
      return r % (max_size + 1);
  }
}

inline void MakeCallPayload(std::vector<std::byte>& out, uint64_t size, uint64_t seed, uint32_t pid,
                            uint32_t thread, uint64_t seq) {
  out.resize(size);
  std::byte header[16];
  std::memcpy(header, &thread, 4);
  std::memcpy(header + 4, &pid, 4);
  std::memcpy(header + 8, &seq, 8);
  // An empty payload has no data() to copy to (memcpy's pointers must not be null).
  if (size > 0) std::memcpy(out.data(), header, std::min<uint64_t>(size, 16));
  if (size > 16) FillPattern(out.data() + 16, size - 16, CallSeed(seed, pid, thread, seq), 16);
}

}  // namespace mcdma::itest
