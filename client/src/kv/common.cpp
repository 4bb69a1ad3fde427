// The hand-off's small shared pieces: ids, states, the layer checksum, and
// the consumers' buffer pool.
#ifdef MCDMA_XXH3_DISPATCH
#include <xxh_x86dispatch.h>  // libxxhash: SSE2, AVX2 or AVX-512, chosen at run time
#else
#define XXH_INLINE_ALL
#include <xxhash.h>
#endif

#include <algorithm>

#include "mcdma/kv.hpp"

namespace mcdma::kv {

Status CheckId(std::string_view handoff_id) {
  bool ok = !handoff_id.empty() && handoff_id.size() <= 64 &&
            std::all_of(handoff_id.begin(), handoff_id.end(), [](char c) {
              return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                     c == '.' || c == '_' || c == ':' || c == '-';
            });
  if (ok) return Status::Ok();
  return Status(Code::kInvalid, "hand-off id '" + std::string(handoff_id.substr(0, 80)) +
                                    "': 1 to 64 of [A-Za-z0-9._:-]");
}

const char* StateName(State state) {
  switch (state) {
    case State::kOpen:
      return "open";
    case State::kClosed:
      return "closed";
    case State::kRevoked:
      return "revoked";
    case State::kExpired:
      return "expired";
  }
  return "unknown";
}

uint64_t Checksum(std::span<const std::byte> bytes) {
#ifdef MCDMA_XXH3_DISPATCH
  return XXH3_64bits_dispatch(bytes.data(), bytes.size());
#else
  return XXH3_64bits(bytes.data(), bytes.size());
#endif
}

BufferPool::BufferPool(Client& client, uint64_t max_idle_bytes)
    : client_(client), max_idle_bytes_(max_idle_bytes) {}

BufferPool::~BufferPool() = default;

Result<Buffer> BufferPool::Take(uint64_t size) {
  {
    std::lock_guard lock(mu_);
    Buffer* best = nullptr;
    for (Buffer& b : buffers_) {
      if (b.use_count() != 1 || b.size() < size || b.size() / 2 > size) continue;
      if (best == nullptr || b.size() < best->size()) best = &b;
    }
    if (best != nullptr) {
      ++hits_;
      return *best;
    }
    ++misses_;
    // Room for the new one: free buffers beyond the idle budget go first.
    TrimLocked(max_idle_bytes_ > size ? max_idle_bytes_ - size : 0);
  }
  auto fresh = client_.Alloc(size);
  if (!fresh.ok()) {
    // Out of shared memory or of this user's budget: what the pool keeps
    // idle may be what is missing.
    Trim();
    fresh = client_.Alloc(size);
    if (!fresh.ok()) return fresh.status();
  }
  std::lock_guard lock(mu_);
  buffers_.push_back(*fresh);
  return *fresh;
}

void BufferPool::Trim() {
  std::lock_guard lock(mu_);
  TrimLocked(0);
}

void BufferPool::TrimLocked(uint64_t keep_bytes) {
  uint64_t idle = 0;
  for (const Buffer& b : buffers_) {
    if (b.use_count() == 1) idle += b.size();
  }
  // The largest free buffers go first: the fewest frees for the bytes.
  while (idle > keep_bytes) {
    auto victim = buffers_.end();
    for (auto it = buffers_.begin(); it != buffers_.end(); ++it) {
      if (it->use_count() == 1 && (victim == buffers_.end() || it->size() > victim->size())) {
        victim = it;
      }
    }
    if (victim == buffers_.end()) break;
    idle -= victim->size();
    buffers_.erase(victim);
  }
}

BufferPool::Counters BufferPool::counters() const {
  std::lock_guard lock(mu_);
  Counters c;
  c.buffers = buffers_.size();
  for (const Buffer& b : buffers_) {
    if (b.use_count() == 1) c.free_bytes += b.size();
  }
  c.hits = hits_;
  c.misses = misses_;
  return c;
}

}  // namespace mcdma::kv
