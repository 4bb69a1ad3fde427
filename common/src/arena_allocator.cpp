#include "mcdma_internal/arena_allocator.hpp"

#include <iterator>

namespace mcdma {

ArenaAllocator::ArenaAllocator(uint64_t base, uint64_t bytes, uint32_t unit)
    : base_(base), bytes_(bytes / unit * unit), unit_(unit), free_bytes_(bytes_) {
  if (bytes_ > 0) free_.emplace(base_, bytes_);
}

uint64_t ArenaAllocator::Rounded(uint64_t bytes) const {
  if (bytes == 0) bytes = 1;
  return (bytes + unit_ - 1) / unit_ * unit_;
}

std::optional<uint64_t> ArenaAllocator::Allocate(uint64_t bytes) {
  uint64_t need = Rounded(bytes);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < need) continue;
    uint64_t off = it->first;
    uint64_t rest = it->second - need;
    free_.erase(it);
    if (rest > 0) free_.emplace(off + need, rest);
    live_.emplace(off, need);
    free_bytes_ -= need;
    return off;
  }
  return std::nullopt;
}

bool ArenaAllocator::Free(uint64_t offset, uint64_t bytes) {
  auto live = live_.find(offset);
  if (live == live_.end() || live->second != Rounded(bytes)) return false;
  uint64_t len = live->second;
  live_.erase(live);
  free_bytes_ += len;
  auto next = free_.lower_bound(offset);
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      offset = prev->first;
      len += prev->second;
      free_.erase(prev);
    }
  }
  if (next != free_.end() && offset + len == next->first) {
    len += next->second;
    free_.erase(next);
  }
  free_.emplace(offset, len);
  return true;
}

}  // namespace mcdma
