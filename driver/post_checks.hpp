// The checks every transport makes the same way, in one place: a range to
// register, and the length and queue room of a request at post time. The
// messages match across transports, so code (and tests) written against
// one sees the same errors from another.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "driver/transport.hpp"
#include "mcdma/status.hpp"

namespace mcdma::driver {

// WorkCompletion::byte_len is 32-bit: no single request may move more,
// whatever the caps say.
inline constexpr uint64_t kMaxRequestBytes = std::numeric_limits<uint32_t>::max();

// "PostSend: ..." style messages.
inline std::string PostMessage(const char* op, const std::string& what) {
  return std::string(op) + ": " + what;
}

// Register(addr, length, access): a nonempty range that does not wrap, known
// access bits, at most caps.max_registration_bytes.
inline Status CheckRegisterRange(const std::byte* addr, uint64_t length, uint32_t access,
                                 uint32_t known_access, const Caps& caps) {
  if (addr == nullptr || length == 0) {
    return Status(Code::kInvalid, "Register: empty range (null address or zero length)");
  }
  if ((access & ~known_access) != 0) return Status(Code::kInvalid, "Register: unknown access bits");
  if (length > std::numeric_limits<uintptr_t>::max() - reinterpret_cast<uintptr_t>(addr)) {
    return Status(Code::kInvalid, "Register: range wraps the address space");
  }
  if (length > caps.max_registration_bytes) {
    return Status(Code::kInvalid, "Register: " + std::to_string(length) +
                                      " bytes exceeds max_registration_bytes (" +
                                      std::to_string(caps.max_registration_bytes) +
                                      "); split the buffer");
  }
  return Status::Ok();
}

// A request of `length` bytes against a caps limit (kInvalid beyond it).
inline Status CheckPostLength(const char* op, uint64_t length, uint64_t limit,
                              const char* limit_name) {
  if (length > limit || length > kMaxRequestBytes) {
    return Status(Code::kInvalid,
                  PostMessage(op, std::to_string(length) + " bytes exceeds " + limit_name + " (" +
                                      std::to_string(limit) + ")"));
  }
  return Status::Ok();
}

// Room in a queue that holds `queued` requests (kBusy when full).
inline Status CheckPostRoom(const char* op, uint32_t queued, uint32_t max_outstanding) {
  if (queued >= max_outstanding) {
    return Status(Code::kBusy, PostMessage(op, "queue holds max_outstanding (" +
                                                   std::to_string(max_outstanding) +
                                                   ") requests; reap completions first"));
  }
  return Status::Ok();
}

}  // namespace mcdma::driver
