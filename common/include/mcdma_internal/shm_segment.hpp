// A POSIX shared-memory segment, mapped: move-only RAII over
// Boost.Interprocess (shared_memory_object + mapped_region).
//
// Ownership: the object owns the mapping; the *name* is owned by whoever
// created it until Unlink() (the daemon unlinks as soon as the app has
// mapped it, so no /dev/shm entry outlives both processes). Destruction
// unmaps; it unlinks only if the name is still linked and this object
// created it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "mcdma/status.hpp"

namespace mcdma {

class ShmSegment {
 public:
  // Creates a new segment (fails if the name exists), mode 0600, chowned to
  // owner_uid when it differs from ours (daemon running as root), sized to
  // `bytes` (rounded up to the page size) and mapped read-write.
  static Result<ShmSegment> Create(const std::string& name, uint64_t bytes, uint32_t owner_uid);
  // Opens and maps an existing segment; fails if its size is not `bytes`.
  static Result<ShmSegment> Open(const std::string& name, uint64_t bytes);
  // Both fail kInvalid for a name that platform::CheckShmName refuses (at
  // most 31 bytes on every OS, macOS's limit).
  //
  // A fresh unguessable name, "/mcdma-<kind>-<22 hex>" (88 random bits):
  // exactly 31 bytes. kind is one character: 'm' mailbox, 'b' buffer.
  static std::string NewName(char kind);
  // The same with the 22 hex characters starting with `tag` (lowercase hex,
  // at most 8 characters) and the rest random (at least 56 bits): the
  // daemon marks its segments with its socket's tag so that its next
  // instance can find what this one left (daemon/src/socket_path.hpp).
  static std::string NewName(char kind, const std::string& tag);

  // An empty segment (no mapping), as left by a move.
  ShmSegment();
  ShmSegment(ShmSegment&&) noexcept;
  ShmSegment& operator=(ShmSegment&&) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;
  ~ShmSegment();

  std::byte* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& name() const { return name_; }
  bool linked() const { return linked_; }
  // Removes the name; the mapping stays valid. Idempotent: after the first
  // call (whatever its result) the segment no longer owns the name. An
  // error names shm_unlink and the segment (EPERM: the name belongs to
  // another user in sticky /dev/shm and this process lacks CAP_FOWNER); a
  // name already gone is not an error.
  Status Unlink();

 private:
  struct Impl;
  explicit ShmSegment(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  std::byte* data_ = nullptr;
  uint64_t size_ = 0;
  std::string name_;
  bool linked_ = false;
};

uint64_t PageSize();
inline uint64_t RoundUpToPage(uint64_t n) { return (n + PageSize() - 1) / PageSize() * PageSize(); }

}  // namespace mcdma
