// Status and Result<T>: how every mcdma API reports failure.
//
// Nothing in mcdma throws across a module boundary. A Status is a named code
// plus a message that says what was wrong (naming the field or call). The
// numeric values of Code are part of the shared-memory protocol (completion
// entries carry them) and of the C ABI (mcdma.h): never renumber them. The
// codes and reasons are listed once, in mcdma/codes.h.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "mcdma/codes.h"

namespace mcdma {

// The X-macros below paste list entries as enumerators and terms: their
// arguments are names and literals, not expressions to parenthesize.
// NOLINTBEGIN(bugprone-macro-parentheses)
enum class Code : uint16_t {
#define MCDMA_CODE_ENUMERATOR_(name, value, cpp, meaning) cpp = value,
  MCDMA_CODE_LIST(MCDMA_CODE_ENUMERATOR_)
#undef MCDMA_CODE_ENUMERATOR_
};

// Refines a Code where a program must decide what to do next (retry a
// lookup, try another route); kNone otherwise. Decisions read the reason,
// never the message text. Values are in the mailbox protocol, the link wire
// and gRPC status details: append only.
enum class Reason : uint16_t {
#define MCDMA_REASON_ENUMERATOR_(name, value, cpp, meaning) cpp = value,
  MCDMA_REASON_LIST(MCDMA_REASON_ENUMERATOR_)
#undef MCDMA_REASON_ENUMERATOR_
};

namespace internal {
#define MCDMA_COUNT_ONE_(name, value, cpp, meaning) +1
inline constexpr uint16_t kCodeCount = 0 MCDMA_CODE_LIST(MCDMA_COUNT_ONE_);
inline constexpr uint16_t kReasonCount = 0 MCDMA_REASON_LIST(MCDMA_COUNT_ONE_);
#undef MCDMA_COUNT_ONE_
// NOLINTEND(bugprone-macro-parentheses)
// True when the list's values are 0, 1, 2, ... in order.
constexpr bool Dense(std::initializer_list<uint16_t> values) {
  uint16_t expected = 0;
  for (uint16_t v : values) {
    if (v != expected++) return false;
  }
  return true;
}
#define MCDMA_VALUE_OF_(name, value, cpp, meaning) value,
static_assert(Dense({MCDMA_CODE_LIST(MCDMA_VALUE_OF_)}), "codes must be dense from 0, in order");
static_assert(Dense({MCDMA_REASON_LIST(MCDMA_VALUE_OF_)}),
              "reasons must be dense from 0, in order");
#undef MCDMA_VALUE_OF_
}  // namespace internal

// The highest code and reason: every value from 0 to these is named.
inline constexpr Code kMaxCode = static_cast<Code>(internal::kCodeCount - 1);
inline constexpr Reason kMaxReason = static_cast<Reason>(internal::kReasonCount - 1);

// Whether a number read from outside (shared memory, a peer, a C caller)
// is a code / reason this build knows.
constexpr bool IsKnownCode(uint64_t raw) { return raw <= static_cast<uint16_t>(kMaxCode); }
constexpr bool IsKnownReason(uint64_t raw) { return raw <= static_cast<uint16_t>(kMaxReason); }
// `raw` as a Code, kInternal when unknown (a number from an untrusted side).
constexpr Code CodeFromWire(uint64_t raw) {
  return IsKnownCode(raw) ? static_cast<Code>(raw) : Code::kInternal;
}
// `raw` as a Reason, kNone when unknown (a newer peer's reason).
constexpr Reason ReasonFromWire(uint64_t raw) {
  return IsKnownReason(raw) ? static_cast<Reason>(raw) : Reason::kNone;
}

// Stable upper-case name, e.g. "OUT_OF_RANGE"; "UNKNOWN" for other values.
const char* CodeName(Code code);
// Inverse of CodeName; kInternal for unknown names.
Code CodeFromName(std::string_view name);
// "NO_SUCH_SERVICE", ...; "UNKNOWN" for other values.
const char* ReasonName(Reason reason);
// Inverse of ReasonName; kNone for unknown names.
Reason ReasonFromName(std::string_view name);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  Status(Code code, Reason reason, std::string message)
      : code_(code), reason_(reason), message_(std::move(message)) {}
  static Status Ok() { return Status(); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  // What a program decides on (the message is for people).
  Reason reason() const { return reason_; }
  const std::string& message() const { return message_; }
  // "TIMEOUT: call to 'echo' ..." or "OK".
  std::string ToString() const;

 private:
  Code code_ = Code::kOk;
  Reason reason_ = Reason::kNone;
  std::string message_;
};

namespace internal {
// Result::value() (or * / ->) on an error: a bug in the caller. Prints the
// status to stderr and aborts; it does not throw.
[[noreturn]] void ValueOfError(const Status& status);
}  // namespace internal

// A value or the Status explaining why there is none. Check ok() before
// value(): value(), operator* and operator-> on an error print the status
// and abort the process (nothing in mcdma throws).
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
  T& value() & { return Get(); }
  const T& value() const& { return Get(); }
  T&& value() && { return std::move(Get()); }
  T* operator->() { return &Get(); }
  const T* operator->() const { return &Get(); }
  T& operator*() & { return Get(); }

 private:
  T& Get() {
    if (!ok()) internal::ValueOfError(std::get<1>(v_));
    return *std::get_if<0>(&v_);
  }
  const T& Get() const {
    if (!ok()) internal::ValueOfError(std::get<1>(v_));
    return *std::get_if<0>(&v_);
  }

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
