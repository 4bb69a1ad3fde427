// The tcp device's memory registrations, shared by the engine thread (which
// registers, deregisters and posts) and the I/O thread (which, like a NIC,
// copies between sockets and registered memory).
//
// Every registration has a unique 64-bit id that is never reused, besides
// its lkey and rkey. Queued work names memory by id, so a region destroyed
// while work waited is detected rather than touched, even if its keys have
// been reused since.
//
// Memory safety rests on pins: the I/O thread pins a region (by id) for the
// duration of each single non-blocking socket call or memcpy that touches
// its bytes. Deregistration removes the region from every map (no new pin
// can find it) and then waits until its pin count is 0, so once a
// MemoryRegion's destructor returns, its memory is never touched again. No
// pin is held across a blocking call, so that wait is short.
//
// Threading: every member takes the registry's mutex; any thread may call.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <random>
#include <unordered_map>

#include "driver/transport.hpp"
#include "mcdma/status.hpp"
#include "mcdma_internal/thread_annotations.hpp"

namespace mcdma::driver::tcp {

class Registry;

// One registration's fixed description, plus its pin count.
struct RegionEntry {
  std::byte* addr = nullptr;
  uint64_t length = 0;
  uint32_t access = 0;
  uint32_t lkey = 0;
  uint32_t rkey = 0;
  uint64_t id = 0;
  const MemoryRegion* owner = nullptr;
  uint32_t pins = 0;  // under Registry::mu_ (which the analysis cannot name here)
};

// Holds a region reachable while alive (move-only). Empty if the region is
// gone; then bytes() is null.
class Pin {
 public:
  Pin() = default;
  Pin(Registry* registry, RegionEntry* entry) : registry_(registry), entry_(entry) {}
  ~Pin() { Release(); }
  Pin(Pin&& other) noexcept : registry_(other.registry_), entry_(other.entry_) {
    other.entry_ = nullptr;
  }
  Pin& operator=(Pin&& other) noexcept;
  Pin(const Pin&) = delete;
  Pin& operator=(const Pin&) = delete;

  explicit operator bool() const { return entry_ != nullptr; }
  std::byte* bytes() const { return entry_ != nullptr ? entry_->addr : nullptr; }
  uint64_t length() const { return entry_ != nullptr ? entry_->length : 0; }
  void Release();

 private:
  Registry* registry_ = nullptr;
  RegionEntry* entry_ = nullptr;
};

// The outcome of a responder's checks on (rkey, addr, length).
struct RemoteTarget {
  Code code = Code::kOk;
  uint64_t region_id = 0;  // when code == kOk
  const char* detail = "";
};

class Registry {
 public:
  explicit Registry(uint32_t max_registrations) : max_registrations_(max_registrations) {}
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Adds `entry` (addr, length, access and owner filled in) with fresh keys
  // and id. kNoMemory when max_registrations regions are live.
  Status Add(RegionEntry& entry) MCDMA_EXCLUDES(mu_);
  // Removes it and waits until no pin holds it.
  void Remove(RegionEntry& entry) MCDMA_EXCLUDES(mu_);

  // Engine side, at post time: the region is one of ours and the slice lies
  // within it; returns the region's id.
  Result<uint64_t> CheckLocal(const char* op, const LocalSlice& slice) MCDMA_EXCLUDES(mu_);

  // I/O side: the NIC's responder checks (unknown rkey or missing access:
  // kPermissionDenied; range outside the region: kOutOfRange).
  RemoteTarget ResolveRemote(uint32_t rkey, uint32_t need, uint64_t addr, uint64_t length)
      MCDMA_EXCLUDES(mu_);
  // Pins the live region with this id, or returns an empty Pin.
  Pin PinId(uint64_t id) MCDMA_EXCLUDES(mu_);

 private:
  friend class Pin;
  void Unpin(RegionEntry* entry) MCDMA_EXCLUDES(mu_);
  uint32_t NewKey() MCDMA_REQUIRES(mu_);

  const uint32_t max_registrations_;
  Mutex mu_;
  std::condition_variable unpinned_;
  std::mt19937 rng_ MCDMA_GUARDED_BY(mu_) = std::mt19937(std::random_device{}());
  uint64_t next_id_ MCDMA_GUARDED_BY(mu_) = 1;
  std::unordered_map<const MemoryRegion*, RegionEntry*> owners_ MCDMA_GUARDED_BY(mu_);
  std::unordered_map<uint32_t, RegionEntry*> by_lkey_ MCDMA_GUARDED_BY(mu_);
  std::unordered_map<uint32_t, RegionEntry*> by_rkey_ MCDMA_GUARDED_BY(mu_);
  std::unordered_map<uint64_t, RegionEntry*> by_id_ MCDMA_GUARDED_BY(mu_);
};

}  // namespace mcdma::driver::tcp
