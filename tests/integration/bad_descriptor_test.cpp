// Malformed submissions written straight into the submission ring of a real
// session (RawSession: no libmcdma threads beside the test, see
// raw_session.hpp). Each must end in exactly one completion with a named
// error, be counted, and leave the session and everyone else working.
#include <grpcpp/grpcpp.h>

#include <cstring>

#include "daemon_fixture.hpp"
#include "mcdma/client.hpp"
#include "mcdma/v1/admin.grpc.pb.h"
#include "pattern.hpp"
#include "raw_session.hpp"

namespace mcdma::itest {
namespace {

using shm::Op;
using shm::SubmitDesc;

constexpr uint64_t kExportBytes = 1 << 20;
const Millis kEventWait(10000);

std::string Name(uint16_t code) { return CodeName(static_cast<Code>(code)); }

SubmitDesc Desc(Op op) {
  SubmitDesc d{};
  d.opcode = static_cast<uint8_t>(op);
  return d;
}

class BadDescriptors : public DaemonTest {
 protected:
  void SetUp() override {
    DaemonTest::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_NE(StartReady("serve", {"--service", "echo"}), nullptr);
    std::string error;
    raw_ = RawSession::Open(socket(), &error);
    ASSERT_NE(raw_, nullptr) << error;
    auto id = raw_->LookupService("echo");
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    echo_id_ = *id;
    ClientOptions o;
    o.socket = socket();
    o.app_name = "well-behaved";
    auto c = Client::Connect(o);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    other_ = std::move(c).value();
    admin_ = v1::Admin::NewStub(
        grpc::CreateChannel("unix:" + socket(), grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    other_buffer_ = Buffer();
    other_.reset();
    raw_.reset();
    // An idle admin channel left open makes the daemon's SIGTERM path wait
    // out its 2 s gRPC shutdown deadline (see the report); close it first.
    admin_.reset();
    DaemonTest::TearDown();
  }

  v1::StatusReply AdminStatus() {
    v1::StatusReply rep;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::Status st = admin_->Status(&ctx, v1::StatusRequest(), &rep);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return rep;
  }

  v1::SessionInfo RawSessionInfo() {
    v1::SessionsReply rep;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::Status st = admin_->Sessions(&ctx, v1::SessionsRequest(), &rep);
    EXPECT_TRUE(st.ok()) << st.error_message();
    for (const auto& s : rep.sessions()) {
      if (s.session_id() == raw_->session_id()) return s;
    }
    ADD_FAILURE() << "the raw session is not listed";
    return {};
  }

  // Submits `d`, expects exactly one completion for it with `want`, and
  // that the daemon counted one more invalid descriptor.
  // `malformed` = false: a well-formed descriptor refused for a runtime
  // reason (e.g. a revoked export); whether that counts as "invalid" is
  // checked by StatusJson.WellBehavedAppsAreNotCountedAsInvalid instead.
  void ExpectRejected(SubmitDesc d, Code want, const std::string& what, bool malformed = true) {
    SCOPED_TRACE(what);
    uint64_t invalid_before = AdminStatus().invalid_descriptors();
    uint64_t tag = raw_->Submit(d);
    auto e = raw_->NextEvent(kEventWait);
    ASSERT_TRUE(e.has_value()) << "no completion within 10 s";
    EXPECT_EQ(e->desc.kind, static_cast<uint8_t>(shm::EventKind::kCompletion));
    EXPECT_EQ(e->desc.tag, tag);
    EXPECT_EQ(Name(e->desc.status), CodeName(want)) << "message: " << e->payload;
    EXPECT_FALSE(e->payload.empty()) << "an error completion should carry its message";
    EXPECT_EQ(e->desc.bytes, 0u);
    std::cerr << "  " << what << " -> " << Name(e->desc.status) << ": " << e->payload << "\n";
    if (malformed) {
      EXPECT_EQ(AdminStatus().invalid_descriptors(), invalid_before + 1);
    }
  }

  // A normal call from the raw session, then one from another client, pass.
  void ExpectStillWorks() {
    std::string req = "still works " + std::to_string(++probe_);
    auto e = raw_->Call(echo_id_, req, kEventWait);
    ASSERT_TRUE(e.has_value()) << "the raw session's call got no (or another op's) completion";
    EXPECT_EQ(Name(e->desc.status), "OK") << e->payload;
    EXPECT_EQ(e->payload, req);
    auto r = other_->Call("echo", req, std::chrono::milliseconds(10000));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(std::string(r->view()), req);
    EXPECT_EQ(raw_->PendingEvents(), 0u) << "extra completions";
  }

  // The other client's exported, patterned buffer, resolved by the raw session.
  v1::ResolveReply ExportFromOther(bool writable) {
    auto b = other_->Alloc(kExportBytes);
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    if (!b.ok()) return {};
    other_buffer_ = *b;
    FillPattern(other_buffer_.data(), kExportBytes, 42);
    ExportOptions eo;
    eo.allow_read = true;
    eo.allow_write = writable;
    Status st = other_->Export(other_buffer_, "bd-exp", eo);
    EXPECT_TRUE(st.ok()) << st.ToString();
    auto r = raw_->Resolve("bd-exp");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : v1::ResolveReply();
  }

  std::unique_ptr<RawSession> raw_;
  std::unique_ptr<Client> other_;
  Buffer other_buffer_;
  std::unique_ptr<v1::Admin::Stub> admin_;
  uint64_t echo_id_ = 0;
  int probe_ = 0;
};

TEST_F(BadDescriptors, UnknownOpcodeCompletesInvalid) {
  ExpectStillWorks();
  for (uint8_t opcode : {uint8_t{7}, uint8_t{200}, uint8_t{255}}) {
    SubmitDesc d{};
    d.opcode = opcode;
    ASSERT_NO_FATAL_FAILURE(ExpectRejected(d, Code::kInvalid, "opcode " + std::to_string(opcode)));
    ASSERT_NO_FATAL_FAILURE(ExpectStillWorks());
  }
  EXPECT_EQ(RawSessionInfo().invalid_descriptors(), 3u);
}

TEST_F(BadDescriptors, PayloadOutsideAppArenaCompletesOutOfRange) {
  const uint64_t app = raw_->geometry().app_arena_bytes;
  const uint64_t daemon = raw_->geometry().daemon_arena_bytes;
  struct Case {
    uint32_t off, len;
    const char* what;
  } cases[] = {
      {static_cast<uint32_t>(app), 64, "payload in the daemon half"},
      {static_cast<uint32_t>(app - 16), 64, "payload straddling the halves"},
      {static_cast<uint32_t>(app + daemon - 64), 128, "payload past the arena's end"},
      {0, 0xFFFFFFFFu, "4 GiB payload"},
      {0xFFFFFF00u, 0x200, "offset near 2^32"},
  };
  for (const Case& c : cases) {
    SubmitDesc d = Desc(Op::kCall);
    d.target = echo_id_;
    d.payload_off = c.off;
    d.payload_len = c.len;
    ASSERT_NO_FATAL_FAILURE(ExpectRejected(d, Code::kOutOfRange, std::string("CALL: ") + c.what));
    ASSERT_NO_FATAL_FAILURE(ExpectStillWorks());
  }
  SubmitDesc n = Desc(Op::kNotify);
  n.target = echo_id_;
  n.payload_off = static_cast<uint32_t>(app);
  n.payload_len = 16;
  ASSERT_NO_FATAL_FAILURE(
      ExpectRejected(n, Code::kOutOfRange, "NOTIFY: payload in the daemon half"));
  SubmitDesc r = Desc(Op::kReply);
  r.target = 1;
  r.payload_off = static_cast<uint32_t>(app + 256);
  r.payload_len = 16;
  ASSERT_NO_FATAL_FAILURE(
      ExpectRejected(r, Code::kOutOfRange, "REPLY: payload in the daemon half"));
  ASSERT_NO_FATAL_FAILURE(ExpectStillWorks());
}

TEST_F(BadDescriptors, ReadOfBufferNotOwnedCompletesNotFound) {
  v1::ResolveReply remote = ExportFromOther(/*writable=*/true);
  ASSERT_NE(remote.handle(), 0u);
  SubmitDesc d = Desc(Op::kRead);
  d.target = remote.handle();
  d.length = 4096;
  d.local_buffer = other_buffer_.id();  // exists, but belongs to the other client
  ASSERT_NO_FATAL_FAILURE(ExpectRejected(d, Code::kNotFound, "READ into another session's buffer"));
  ASSERT_NO_FATAL_FAILURE(ExpectStillWorks());
  d.local_buffer = 0xDEADBEEFull;
  ASSERT_NO_FATAL_FAILURE(
      ExpectRejected(d, Code::kNotFound, "READ into a buffer that does not exist"));
  SubmitDesc w = d;
  w.opcode = static_cast<uint8_t>(Op::kWrite);
  w.local_buffer = other_buffer_.id();
  ASSERT_NO_FATAL_FAILURE(
      ExpectRejected(w, Code::kNotFound, "WRITE from another session's buffer"));
  ASSERT_NO_FATAL_FAILURE(ExpectStillWorks());
  // With its own buffer but a handle it never resolved.
  auto own = raw_->Alloc(4096);
  ASSERT_TRUE(own.ok()) << own.status().ToString();
  d.local_buffer = own->id;
  d.target = remote.handle() + 1000;
  ASSERT_NO_FATAL_FAILURE(
      ExpectRejected(d, Code::kNotFound, "READ through an unknown remote handle"));
  // The other client's memory was not touched by any of it.
  EXPECT_TRUE(VerifyPattern(other_buffer_.data(), kExportBytes, 42).ok);
  ASSERT_NO_FATAL_FAILURE(ExpectStillWorks());
}

TEST_F(BadDescriptors, ReadPastExportEndCompletesOutOfRange) {
  v1::ResolveReply remote = ExportFromOther(/*writable=*/false);
  ASSERT_EQ(remote.length(), kExportBytes);
  auto own = raw_->Alloc(2 * kExportBytes);
  ASSERT_TRUE(own.ok()) << own.status().ToString();
  struct Case {
    uint64_t remote_offset, local_offset, length;
    const char* what;
  } cases[] = {
      {kExportBytes - 100, 0, 4096, "READ running past the export's end"},
      {kExportBytes + 1, 0, 1, "READ starting past the export's end"},
      {~uint64_t{0} - 10, 0, 100, "READ whose end overflows 64 bits"},
      {0, 2 * kExportBytes - 10, 4096, "READ running past the local buffer's end"},
      {0, ~uint64_t{0} - 10, 100, "READ whose local end overflows 64 bits"},
  };
  for (const Case& c : cases) {
    SubmitDesc d = Desc(Op::kRead);
    d.target = remote.handle();
    d.local_buffer = own->id;
    d.remote_offset = c.remote_offset;
    d.local_offset = c.local_offset;
    d.length = c.length;
    ASSERT_NO_FATAL_FAILURE(ExpectRejected(d, Code::kOutOfRange, c.what));
    ASSERT_NO_FATAL_FAILURE(ExpectStillWorks());
  }
  // The whole export, exactly, still reads and every byte is right.
  SubmitDesc d = Desc(Op::kRead);
  d.target = remote.handle();
  d.local_buffer = own->id;
  d.local_offset = kExportBytes;
  d.length = kExportBytes;
  uint64_t tag = raw_->Submit(d);
  auto e = raw_->NextEvent(kEventWait);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->desc.tag, tag);
  EXPECT_EQ(Name(e->desc.status), "OK") << e->payload;
  EXPECT_EQ(e->desc.bytes, kExportBytes);
  VerifyResult v = VerifyPattern(own->segment.data() + kExportBytes, kExportBytes, 42);
  EXPECT_TRUE(v.ok) << v.bad_bytes << " bad bytes from " << v.first_bad;
}

TEST_F(BadDescriptors, ReleaseOfRangeNeverDeliveredCompletesInvalid) {
  const uint32_t app = static_cast<uint32_t>(raw_->geometry().app_arena_bytes);
  auto release = [](uint32_t off, uint32_t len) {
    SubmitDesc d = Desc(Op::kRelease);
    d.flags = shm::kFlagNoCompletion;  // only errors complete
    d.payload_off = off;
    d.payload_len = len;
    return d;
  };
  ASSERT_NO_FATAL_FAILURE(ExpectRejected(release(app + 7 * 4096, 256), Code::kInvalid,
                                         "RELEASE of a daemon-half range never delivered"));
  ASSERT_NO_FATAL_FAILURE(ExpectStillWorks());
  ASSERT_NO_FATAL_FAILURE(
      ExpectRejected(release(0, 256), Code::kInvalid, "RELEASE of an app-half range"));
  ASSERT_NO_FATAL_FAILURE(
      ExpectRejected(release(0xFFFFFF00u, 0x1000), Code::kInvalid, "RELEASE outside the arena"));
  ASSERT_NO_FATAL_FAILURE(ExpectStillWorks());
  // A range that was delivered, released once (by NextEvent), then again.
  auto e = raw_->Call(echo_id_, std::string(1000, 'x'), kEventWait);
  ASSERT_TRUE(e.has_value());
  ASSERT_EQ(e->desc.payload_len, 1000u);
  ASSERT_NO_FATAL_FAILURE(ExpectRejected(release(e->desc.payload_off, e->desc.payload_len),
                                         Code::kInvalid, "second RELEASE"));
  ASSERT_NO_FATAL_FAILURE(ExpectStillWorks());
}

TEST_F(BadDescriptors, SubmissionTailFarAheadIsACountedRingFault) {
  ASSERT_EQ(AdminStatus().ring_faults(), 0u);
  for (int64_t jump : {int64_t{5000}, int64_t{-1}}) {
    SCOPED_TRACE("sq_tail moved by " + std::to_string(jump));
    uint64_t faults_before = AdminStatus().ring_faults();
    raw_->PublishTail(static_cast<uint32_t>(raw_->sq_tail() + jump));
    auto e = raw_->NextEvent(kEventWait);
    ASSERT_TRUE(e.has_value()) << "no fault event";
    EXPECT_EQ(e->desc.kind, static_cast<uint8_t>(shm::EventKind::kFault));
    EXPECT_EQ(Name(e->desc.status), "OUT_OF_RANGE");
    std::cerr << "  fault: " << e->payload << "\n";
    EXPECT_EQ(AdminStatus().ring_faults(), faults_before + 1);
    ASSERT_NO_FATAL_FAILURE(ExpectStillWorks());
  }
  EXPECT_EQ(RawSessionInfo().ring_faults(), 2u);
  EXPECT_EQ(raw_->header()->closed.value.load(), 0u) << "two faults must not close the session";
}

// Past limits.max_ring_faults the daemon closes the faulty session (and only
// it): the closed word names the reason and other clients carry on.
TEST_F(BadDescriptors, RepeatedRingFaultsCloseOnlyThatSession) {
  uint32_t closed = 0;
  for (int i = 0; i < 200 && closed == 0; ++i) {
    raw_->PublishTail(raw_->sq_tail() + 5000);
    auto e = raw_->NextEvent(Millis(2000));
    closed = raw_->header()->closed.value.load();
    if (!e && closed == 0) FAIL() << "no fault event and the session is not closed, round " << i;
  }
  EXPECT_NE(closed, 0u) << "200 ring faults did not close the session";
  EXPECT_EQ(CodeName(static_cast<Code>(closed)), std::string("INVALID"));
  EXPECT_TRUE(PollUntil(
      [&] {
        v1::SessionsReply rep;
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
        admin_->Sessions(&ctx, v1::SessionsRequest(), &rep);
        for (const auto& s : rep.sessions()) {
          if (s.session_id() == raw_->session_id()) return false;
        }
        return true;
      },
      Millis(10000)));
  auto r = other_->Call("echo", "after eviction", std::chrono::milliseconds(10000));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(std::string(r->view()), "after eviction");
  EXPECT_GE(AdminStatus().ring_faults(), 65u);
}

TEST_F(BadDescriptors, OtherMalformedDescriptorsCompleteWithNamedErrors) {
  v1::ResolveReply remote = ExportFromOther(/*writable=*/false);
  ASSERT_NE(remote.handle(), 0u);
  auto own = raw_->Alloc(kExportBytes);
  ASSERT_TRUE(own.ok());
  SubmitDesc zero = Desc(Op::kRead);
  zero.target = remote.handle();
  zero.local_buffer = own->id;
  zero.length = 0;
  ASSERT_NO_FATAL_FAILURE(ExpectRejected(zero, Code::kInvalid, "zero-length READ"));
  SubmitDesc w = zero;
  w.opcode = static_cast<uint8_t>(Op::kWrite);
  w.length = 4096;
  ASSERT_NO_FATAL_FAILURE(ExpectRejected(w, Code::kPermissionDenied, "WRITE to a read-only export",
                                         /*malformed=*/false));
  EXPECT_TRUE(VerifyPattern(other_buffer_.data(), kExportBytes, 42).ok);
  SubmitDesc call = Desc(Op::kCall);
  call.target = echo_id_ + 12345;
  ASSERT_NO_FATAL_FAILURE(ExpectRejected(
      call, Code::kNotFound, "CALL to a service id nobody serves", /*malformed=*/false));
  SubmitDesc reply = Desc(Op::kReply);
  reply.target = 987654;
  ASSERT_NO_FATAL_FAILURE(ExpectRejected(
      reply, Code::kNotFound, "REPLY to a call that is not pending", /*malformed=*/false));
  reply.status = 999;
  ASSERT_NO_FATAL_FAILURE(
      ExpectRejected(reply, Code::kInvalid, "REPLY with an unknown status code"));
  ASSERT_NO_FATAL_FAILURE(ExpectStillWorks());
  // After the export is gone, the handle reads REVOKED.
  ASSERT_TRUE(other_->Unexport("bd-exp").ok());
  SubmitDesc rd = zero;
  rd.length = 4096;
  ASSERT_NO_FATAL_FAILURE(
      ExpectRejected(rd, Code::kRevoked, "READ of an unexported export", /*malformed=*/false));
  ASSERT_NO_FATAL_FAILURE(ExpectStillWorks());
}

// The completion ring's consumer index is the app's to write too: one that
// is out of range is a ring fault (like a bad sq_tail) and must be counted in
// status; the completion waits in the backlog until the index is sane again.
TEST_F(BadDescriptors, CompletionHeadOutOfRangeIsACountedRingFault) {
  ASSERT_NO_FATAL_FAILURE(ExpectStillWorks());
  const uint32_t head = raw_->header()->cq_head.value.load();
  raw_->header()->cq_head.value.store(head + 5000);
  uint64_t tag = raw_->Submit(Desc(Op::kNop));
  EXPECT_TRUE(PollUntil(
      [&] {
        v1::SessionInfo s = RawSessionInfo();
        return s.ring_faults() >= 1 && s.backlog() >= 1;
      },
      Millis(10000)))
      << "ring_faults=" << RawSessionInfo().ring_faults()
      << " backlog=" << RawSessionInfo().backlog();
  EXPECT_EQ(RawSessionInfo().ring_faults(), 1u);
  EXPECT_EQ(AdminStatus().ring_faults(), RawSessionInfo().ring_faults())
      << "the session's ring fault is missing from the daemon-wide ring_faults in status";
  raw_->header()->cq_head.value.store(head);
  auto e = raw_->NextEvent(kEventWait);
  ASSERT_TRUE(e.has_value()) << "the backlogged completion never came";
  EXPECT_EQ(e->desc.tag, tag);
  EXPECT_EQ(Name(e->desc.status), "OK");
  ASSERT_NO_FATAL_FAILURE(ExpectStillWorks());
}

}  // namespace
}  // namespace mcdma::itest
