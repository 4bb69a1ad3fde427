// Best-fit range allocator over [base, base + bytes) in kArenaUnit units,
// with coalescing. Used by the app for its half of the mailbox arena and by
// the daemon for its half. Free ranges are indexed by offset (to coalesce)
// and by size (to find the smallest that fits), so every operation is
// O(log n) however fragmented the arena is: an app that leaves the daemon
// half in a quarter-million holes costs each allocation a tree lookup, not
// a walk. Not thread-safe: each user holds its own lock.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>

namespace mcdma {

class ArenaAllocator {
 public:
  ArenaAllocator(uint64_t base, uint64_t bytes, uint32_t unit);

  // Returns the offset of a range of at least `bytes` (a 0-byte request
  // takes one unit), or nullopt when no free range is large enough.
  std::optional<uint64_t> Allocate(uint64_t bytes);
  // Frees a range returned by Allocate. Returns false (and changes nothing)
  // if `offset` is not the start of a live allocation of exactly that size
  // class: the daemon uses this to reject forged RELEASE descriptors.
  bool Free(uint64_t offset, uint64_t bytes);
  // Size reserved for a request of `bytes`.
  uint64_t Rounded(uint64_t bytes) const;

  uint64_t free_bytes() const { return free_bytes_; }
  uint64_t capacity() const { return bytes_; }
  size_t live_allocations() const { return live_.size(); }
  size_t free_ranges() const { return free_.size(); }

 private:
  uint64_t base_;
  uint64_t bytes_;
  uint32_t unit_;
  uint64_t free_bytes_;
  void AddFree(uint64_t offset, uint64_t length);
  void RemoveFree(std::map<uint64_t, uint64_t>::iterator it);

  std::map<uint64_t, uint64_t> free_;                     // offset -> length
  std::set<std::pair<uint64_t, uint64_t>> free_by_size_;  // (length, offset)
  std::map<uint64_t, uint64_t> live_;                     // offset -> length
};

}  // namespace mcdma
