// What the soak's apps put in their messages, and the ledgers that show a
// message lost or delivered twice (soak_app.cpp writes them, soak_driver.cpp
// checks them).
//
// Every call and notification starts with a Header: who sent it (the
// sender's incarnation and thread), which incarnation of the target app it
// is meant for (learned with a WHO call on the very service id the message
// goes to), and a sequence number that counts that sender's messages to
// that target incarnation from 0. The rest is the pattern of a seed derived
// from the header, so a receiver can check every byte.
#pragma once

#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "pattern.hpp"

namespace mcdma::soak {

inline constexpr uint32_t kMagic = 0x4B414F53;  // "SOAK"
enum class Kind : uint32_t { kWho = 1, kCall = 2, kNotify = 3 };

struct Header {
  uint32_t magic = kMagic;
  Kind kind = Kind::kCall;
  uint64_t sender = 0;      // the sender's incarnation * 8 + its thread
  uint64_t target_inc = 0;  // the receiving incarnation it is meant for
  uint64_t seq = 0;         // per (sender, target_inc), from 0
};
static_assert(sizeof(Header) == 32);

inline uint64_t BodySeed(const Header& h) {
  return itest::Mix(h.sender ^ itest::Mix(h.seq) ^ (static_cast<uint64_t>(h.kind) << 56));
}

// A message of `size` bytes (at least the header) for `h`.
inline std::vector<std::byte> MakeMessage(const Header& h, uint64_t size) {
  std::vector<std::byte> out(std::max<uint64_t>(size, sizeof(Header)));
  std::memcpy(out.data(), &h, sizeof(h));
  itest::FillPattern(out.data() + sizeof(h), out.size() - sizeof(h), BodySeed(h), sizeof(h));
  return out;
}

// The header of a message whose every byte is right; false otherwise.
inline bool ReadMessage(const std::byte* data, uint64_t size, Header* h) {
  if (size < sizeof(Header)) return false;
  std::memcpy(h, data, sizeof(*h));
  if (h->magic != kMagic) return false;
  return itest::VerifyPattern(data + sizeof(*h), size - sizeof(*h), BodySeed(*h), sizeof(*h)).ok;
}

// The sequence numbers one receiver got from one sender, in arrival order:
// ranges [first, last]. Anything not above the last one is a duplicate (or
// out of order: the sender waits for each message before the next).
class SeqRanges {
 public:
  // False (and nothing recorded) for a duplicate or out-of-order number.
  bool Add(uint64_t seq) {
    if (!ranges_.empty() && seq <= ranges_.back().second) return false;
    if (!ranges_.empty() && seq == ranges_.back().second + 1) {
      ranges_.back().second = seq;
    } else {
      ranges_.emplace_back(seq, seq);
    }
    return true;
  }
  bool Contains(uint64_t seq) const {
    for (const auto& [a, b] : ranges_) {
      if (seq >= a && seq <= b) return true;
    }
    return false;
  }
  uint64_t Count() const {
    uint64_t n = 0;
    for (const auto& [a, b] : ranges_) n += b - a + 1;
    return n;
  }
  uint64_t Max() const { return ranges_.empty() ? 0 : ranges_.back().second; }
  bool empty() const { return ranges_.empty(); }
  // "a-b,c-d"
  std::string Format() const {
    std::string out;
    for (const auto& [a, b] : ranges_) {
      out += (out.empty() ? "" : ",") + std::to_string(a) + "-" + std::to_string(b);
    }
    return out.empty() ? "-" : out;
  }
  static SeqRanges Parse(const std::string& text) {
    SeqRanges r;
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ',')) {
      auto dash = item.find('-');
      if (dash == std::string::npos || dash == 0) continue;
      r.ranges_.emplace_back(std::stoull(item.substr(0, dash)), std::stoull(item.substr(dash + 1)));
    }
    return r;
  }

 private:
  std::vector<std::pair<uint64_t, uint64_t>> ranges_;
};

}  // namespace mcdma::soak
