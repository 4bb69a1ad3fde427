// Status, Result and Code names: the names are what the C ABI, the Python
// binding and --json output carry; the numbers are in the shared-memory
// protocol. Both must stay stable.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>

#include "mcdma/status.hpp"

namespace mcdma {
namespace {

// The wire numbers in use: appending a code changes these, renumbering must not.
constexpr uint16_t kCodeCount = 16;
constexpr uint16_t kReasonCount = 21;
static_assert(static_cast<uint16_t>(kMaxCode) + 1 == kCodeCount);
static_assert(static_cast<uint16_t>(kMaxReason) + 1 == kReasonCount);
static_assert(IsKnownCode(15) && !IsKnownCode(16) && !IsKnownCode(UINT64_MAX));
static_assert(CodeFromWire(8) == Code::kLinkDown && CodeFromWire(16) == Code::kInternal);
static_assert(ReasonFromWire(1) == Reason::kNoSuchService &&
              ReasonFromWire(13) == Reason::kNameReserved &&
              ReasonFromWire(19) == Reason::kHandoffChecksum &&
              ReasonFromWire(20) == Reason::kRailEndDown && ReasonFromWire(21) == Reason::kNone);

TEST(Status, CodeNamesRoundTrip) {
  std::set<std::string> names;
  for (uint16_t i = 0; i < kCodeCount; ++i) {
    Code code = static_cast<Code>(i);
    std::string name = CodeName(code);
    EXPECT_NE(name, "UNKNOWN") << "code " << i;
    EXPECT_EQ(CodeFromName(name), code) << name;
    names.insert(name);
  }
  EXPECT_EQ(names.size(), kCodeCount) << "two codes share a name";
}

TEST(Status, CodesKeepTheirWireNumbersAndNames) {
  struct Expected {
    Code code;
    uint16_t number;
    const char* name;
  };
  for (const Expected& e : {
           Expected{Code::kOk, 0, "OK"},
           Expected{Code::kInvalid, 1, "INVALID"},
           Expected{Code::kOutOfRange, 2, "OUT_OF_RANGE"},
           Expected{Code::kNotFound, 3, "NOT_FOUND"},
           Expected{Code::kPermissionDenied, 4, "PERMISSION_DENIED"},
           Expected{Code::kAlreadyExists, 5, "ALREADY_EXISTS"},
           Expected{Code::kNoMemory, 6, "NO_MEMORY"},
           Expected{Code::kTimeout, 7, "TIMEOUT"},
           Expected{Code::kLinkDown, 8, "LINK_DOWN"},
           Expected{Code::kPeerGone, 9, "PEER_GONE"},
           Expected{Code::kRevoked, 10, "REVOKED"},
           Expected{Code::kCancelled, 11, "CANCELLED"},
           Expected{Code::kUnavailable, 12, "UNAVAILABLE"},
           Expected{Code::kInternal, 13, "INTERNAL"},
           Expected{Code::kBusy, 14, "BUSY"},
           Expected{Code::kSystem, 15, "SYSTEM"},
       }) {
    EXPECT_EQ(static_cast<uint16_t>(e.code), e.number) << e.name;
    EXPECT_STREQ(CodeName(e.code), e.name);
  }
}

TEST(Status, UnknownCodeIsNamedUnknown) {
  EXPECT_STREQ(CodeName(static_cast<Code>(kCodeCount)), "UNKNOWN");
  EXPECT_STREQ(CodeName(static_cast<Code>(0xffff)), "UNKNOWN");
}

TEST(Status, UnknownNameMapsToInternal) {
  EXPECT_EQ(CodeFromName(""), Code::kInternal);
  EXPECT_EQ(CodeFromName("UNKNOWN"), Code::kInternal);
  EXPECT_EQ(CodeFromName("timeout"), Code::kInternal) << "names are case-sensitive";
  EXPECT_EQ(CodeFromName("TIMEOUT "), Code::kInternal);
}

TEST(Status, ReasonNamesRoundTripAndKeepTheirNumbers) {
  EXPECT_STREQ(ReasonName(Reason::kNone), "NONE");
  EXPECT_STREQ(ReasonName(Reason::kNoSuchService), "NO_SUCH_SERVICE");
  EXPECT_STREQ(ReasonName(Reason::kNotLinked), "NOT_LINKED");
  EXPECT_EQ(static_cast<uint16_t>(Reason::kNoSuchService), 1);
  EXPECT_EQ(static_cast<uint16_t>(Reason::kNotLinked), 2);
  EXPECT_EQ(static_cast<uint16_t>(Reason::kKeyFileMode), 3);
  EXPECT_EQ(static_cast<uint16_t>(Reason::kKeyFileOwner), 4);
  EXPECT_EQ(static_cast<uint16_t>(Reason::kAccessDenied), 5);
  EXPECT_EQ(static_cast<uint16_t>(Reason::kKeyFileLink), 6);
  EXPECT_EQ(static_cast<uint16_t>(Reason::kPeerIdentity), 7);
  EXPECT_EQ(static_cast<uint16_t>(Reason::kTransportRefused), 8);
  EXPECT_EQ(static_cast<uint16_t>(Reason::kShmFull), 9);
  EXPECT_EQ(static_cast<uint16_t>(Reason::kFdLimit), 10);
  EXPECT_EQ(static_cast<uint16_t>(Reason::kBacklogFull), 11);
  EXPECT_EQ(static_cast<uint16_t>(Reason::kUserQuota), 12);
  EXPECT_EQ(static_cast<uint16_t>(Reason::kNameReserved), 13);
  EXPECT_EQ(static_cast<uint16_t>(Reason::kHandoffManifest), 14);
  EXPECT_EQ(static_cast<uint16_t>(Reason::kHandoffDigest), 15);
  EXPECT_EQ(static_cast<uint16_t>(Reason::kHandoffExpired), 16);
  EXPECT_EQ(static_cast<uint16_t>(Reason::kHandoffRevoked), 17);
  EXPECT_EQ(static_cast<uint16_t>(Reason::kHandoffProducerGone), 18);
  EXPECT_EQ(static_cast<uint16_t>(Reason::kHandoffChecksum), 19);
  EXPECT_EQ(static_cast<uint16_t>(Reason::kRailEndDown), 20);
  for (uint16_t i = 0; i < kReasonCount; ++i) {
    auto r = static_cast<Reason>(i);
    EXPECT_EQ(ReasonFromName(ReasonName(r)), r);
  }
  EXPECT_STREQ(ReasonName(static_cast<Reason>(kReasonCount)), "UNKNOWN");
  EXPECT_EQ(ReasonFromName("not_linked"), Reason::kNone);
}

TEST(Status, CarriesAReasonApartFromItsMessage) {
  Status plain(Code::kNotFound, "no export named 'x'");
  EXPECT_EQ(plain.reason(), Reason::kNone);
  Status gone(Code::kNotFound, Reason::kNoSuchService, "anything at all");
  EXPECT_EQ(gone.code(), Code::kNotFound);
  EXPECT_EQ(gone.reason(), Reason::kNoSuchService);
  EXPECT_EQ(gone.ToString(), "NOT_FOUND: anything at all") << "the reason is not in the text";
  EXPECT_EQ(Status().reason(), Reason::kNone);
}

TEST(Status, ToStringNamesCodeAndMessage) {
  EXPECT_EQ(Status::Ok().ToString(), "OK");
  EXPECT_TRUE(Status().ok());
  Status timeout(Code::kTimeout, "call to 'echo' after 5 ms");
  EXPECT_FALSE(timeout.ok());
  EXPECT_EQ(timeout.code(), Code::kTimeout);
  EXPECT_EQ(timeout.ToString(), "TIMEOUT: call to 'echo' after 5 ms");
  EXPECT_EQ(Status(Code::kBusy, "").ToString(), "BUSY");
}

Status FailIf(bool fail) {
  if (fail) return Status(Code::kNotFound, "no such buffer");
  return Status::Ok();
}

Result<int> Half(int v) {
  if (v % 2 != 0) return Status(Code::kInvalid, "odd");
  return v / 2;
}

Result<int> Quarter(int v) {
  MCDMA_RETURN_IF_ERROR(FailIf(v < 0));
  MCDMA_ASSIGN_OR_RETURN(int half, Half(v));
  MCDMA_ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

TEST(Status, ResultCarriesValueOrStatusThroughMacros) {
  Result<int> ok = Quarter(12);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 3);
  EXPECT_TRUE(ok.status().ok());

  Result<int> odd = Quarter(6);
  EXPECT_EQ(odd.status().code(), Code::kInvalid);
  EXPECT_EQ(odd.status().message(), "odd");

  EXPECT_EQ(Quarter(-4).status().code(), Code::kNotFound);
}

// What the header promises: value() on an error neither throws nor returns
// garbage; it names the status and aborts.
TEST(StatusDeathTest, ValueOfAnErrorAbortsNamingTheStatus) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Result<int> odd = Half(3);
  EXPECT_DEATH((void)odd.value(), "Result::value\\(\\) called on an error: INVALID: odd");
  EXPECT_DEATH((void)*odd, "INVALID: odd");
  const Result<std::string> missing = Status(Code::kNotFound, "no such buffer");
  EXPECT_DEATH((void)missing->size(), "NOT_FOUND: no such buffer");
  EXPECT_DEATH((void)std::move(odd).value(), "INVALID: odd");
}

}  // namespace
}  // namespace mcdma
