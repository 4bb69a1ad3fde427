// Registry: keys, ids and pins of the tcp device's registrations.
#include "driver/tcp/tcp_registry.hpp"

#include <optional>
#include <string>
#include <utility>

#include "driver/post_checks.hpp"

namespace mcdma::driver::tcp {

Pin& Pin::operator=(Pin&& other) noexcept {
  if (this != &other) {
    Release();
    registry_ = other.registry_;
    entry_ = std::exchange(other.entry_, nullptr);
  }
  return *this;
}

void Pin::Release() {
  if (entry_ != nullptr) registry_->Unpin(std::exchange(entry_, nullptr));
}

uint32_t Registry::NewKey() {
  for (;;) {
    auto key = static_cast<uint32_t>(rng_());
    if (key != 0 && !by_lkey_.contains(key) && !by_rkey_.contains(key)) return key;
  }
}

Status Registry::Add(RegionEntry& entry) {
  MutexLock lock(mu_);
  MCDMA_RETURN_IF_ERROR(CheckRegistrationRoom(owners_.size(), max_registrations_));
  // Each key is drawn after the previous one is in the maps, so the two
  // differ from each other as well as from every other live key.
  entry.lkey = NewKey();
  by_lkey_.emplace(entry.lkey, &entry);
  entry.rkey = NewKey();
  by_rkey_.emplace(entry.rkey, &entry);
  entry.id = next_id_++;
  by_id_.emplace(entry.id, &entry);
  owners_.emplace(entry.owner, &entry);
  return Status::Ok();
}

void Registry::Remove(RegionEntry& entry) {
  MutexLock lock(mu_);
  owners_.erase(entry.owner);
  by_id_.erase(entry.id);
  by_rkey_.erase(entry.rkey);
  by_lkey_.erase(entry.lkey);
  // Unreachable from now on; wait out the socket call or copy in progress.
  unpinned_.wait(lock.native(), [&] { return entry.pins == 0; });
}

Result<uint64_t> Registry::CheckLocal(const char* op, const LocalSlice& slice) {
  std::optional<uint64_t> length;
  uint64_t id = 0;
  {
    MutexLock lock(mu_);
    // Membership first: a foreign or destroyed region must not be dereferenced.
    auto it = owners_.find(slice.region);
    if (it != owners_.end()) {
      length = it->second->length;
      id = it->second->id;
    }
  }
  MCDMA_RETURN_IF_ERROR(CheckLocalSlice(op, slice, length));
  return id;
}

RemoteTarget Registry::ResolveRemote(uint32_t rkey, uint32_t need, uint64_t addr, uint64_t length) {
  // Details never carry the key or address: completions get logged.
  MutexLock lock(mu_);
  auto it = by_rkey_.find(rkey);
  if (it == by_rkey_.end()) {
    return {Code::kPermissionDenied, 0, "rkey names no live registration"};
  }
  const RegionEntry& entry = *it->second;
  if ((entry.access & need) != need) {
    return {Code::kPermissionDenied, 0,
            need == kAccessRemoteWrite ? "remote region does not allow remote writes"
                                       : "remote region does not allow remote reads"};
  }
  if (!RangeWithin(addr, length, entry.length)) {
    return {Code::kOutOfRange, 0, "remote range outside the registered region"};
  }
  return {Code::kOk, entry.id, ""};
}

Pin Registry::PinId(uint64_t id) {
  MutexLock lock(mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return {};
  ++it->second->pins;
  return {this, it->second};
}

void Registry::Unpin(RegionEntry* entry) {
  MutexLock lock(mu_);
  if (--entry->pins == 0) unpinned_.notify_all();
}

}  // namespace mcdma::driver::tcp
