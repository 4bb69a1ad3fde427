// Status and Result<T>: how every mcdma API reports failure.
//
// Nothing in mcdma throws across a module boundary. A Status is a named code
// plus a message that says what was wrong (naming the field or call). The
// numeric values of Code are part of the shared-memory protocol (completion
// entries carry them) and of the C ABI (mcdma.h): never renumber them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace mcdma {

enum class Code : uint16_t {
  kOk = 0,
  kInvalid = 1,           // malformed request: bad opcode, bad argument
  kOutOfRange = 2,        // index, offset or length outside its segment
  kNotFound = 3,          // no such session, buffer, export or service
  kPermissionDenied = 4,  // bad token, access not granted
  kAlreadyExists = 5,     // name taken
  kNoMemory = 6,          // segment, arena or ring space exhausted
  kTimeout = 7,           // the deadline passed before completion
  kLinkDown = 8,          // the link carrying the operation went down
  kPeerGone = 9,          // the serving or owning app/peer went away
  kRevoked = 10,          // the export was unexported or expired
  kCancelled = 11,        // the operation was abandoned (session closing)
  kUnavailable = 12,      // daemon not reachable or draining
  kInternal = 13,         // a bug or an unexpected system failure
  kBusy = 14,             // a queue is full; retry later
  kSystem = 15,           // a system call failed (message names it + errno)
};

// Stable upper-case name, e.g. "OUT_OF_RANGE"; "UNKNOWN" for other values.
const char* CodeName(Code code);
// Inverse of CodeName; kInternal for unknown names.
Code CodeFromName(std::string_view name);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return Status(); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "TIMEOUT: call to 'echo' ..." or "OK".
  std::string ToString() const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

// A value or the Status explaining why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT(runtime/explicit)
  Result(Status status) : v_(std::move(status)) {}  // NOLINT(runtime/explicit)

  bool ok() const { return v_.index() == 0; }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<1>(v_);
  }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }
  T& operator*() & { return std::get<0>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace mcdma

// Early return on error inside functions returning Status or Result<T>.
#define MCDMA_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::mcdma::Status mcdma_status_ = (expr);        \
    if (!mcdma_status_.ok()) return mcdma_status_; \
  } while (0)

#define MCDMA_CONCAT_INNER_(a, b) a##b
#define MCDMA_CONCAT_(a, b) MCDMA_CONCAT_INNER_(a, b)
#define MCDMA_ASSIGN_OR_RETURN(lhs, expr) \
  MCDMA_ASSIGN_OR_RETURN_IMPL_(MCDMA_CONCAT_(mcdma_result_, __LINE__), lhs, expr)
// `lhs` may be a declaration ("auto x"), so it cannot be parenthesized.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define MCDMA_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)
