#include "mcdma_internal/arena_allocator.hpp"

#include <iterator>

namespace mcdma {

ArenaAllocator::ArenaAllocator(uint64_t base, uint64_t bytes, uint32_t unit)
    : base_(base), bytes_(bytes / unit * unit), unit_(unit), free_bytes_(bytes_) {
  if (bytes_ > 0) AddFree(base_, bytes_);
}

uint64_t ArenaAllocator::Rounded(uint64_t bytes) const {
  if (bytes == 0) bytes = 1;
  return (bytes + unit_ - 1) / unit_ * unit_;
}

void ArenaAllocator::AddFree(uint64_t offset, uint64_t length) {
  free_.emplace(offset, length);
  free_by_size_.emplace(length, offset);
}

void ArenaAllocator::RemoveFree(std::map<uint64_t, uint64_t>::iterator it) {
  free_by_size_.erase({it->second, it->first});
  free_.erase(it);
}

std::optional<uint64_t> ArenaAllocator::Allocate(uint64_t bytes) {
  if (bytes > bytes_) return std::nullopt;
  uint64_t need = Rounded(bytes);
  // The smallest free range that fits; the lowest offset among equals.
  auto fit = free_by_size_.lower_bound({need, 0});
  if (fit == free_by_size_.end()) return std::nullopt;
  uint64_t off = fit->second;
  uint64_t rest = fit->first - need;
  RemoveFree(free_.find(off));
  if (rest > 0) AddFree(off + need, rest);
  live_.emplace(off, need);
  free_bytes_ -= need;
  return off;
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
      RemoveFree(prev);
    }
  }
  if (next != free_.end() && offset + len == next->first) {
    len += next->second;
    RemoveFree(next);
  }
  AddFree(offset, len);
  return true;
}

}  // namespace mcdma
