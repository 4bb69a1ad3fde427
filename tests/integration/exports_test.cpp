// Exports through the public API against a real daemon: bounds of a
// sub-range, permissions, TTL expiry, unexport and free revoking handles.
#include "daemon_fixture.hpp"
#include "mcdma/client.hpp"
#include "pattern.hpp"
#include "test_util.hpp"

namespace mcdma::itest {
namespace {

class Exports : public DaemonTest {
 protected:
  void SetUp() override {
    DaemonTest::SetUp();
    if (HasFatalFailure()) return;
    owner_ = Connect("export-owner");
    reader_ = Connect("export-reader");
    ASSERT_TRUE(owner_ && reader_);
    auto local = reader_->Alloc(kMiB);
    ASSERT_TRUE(local.ok()) << local.status().ToString();
    local_ = *local;
  }
  void TearDown() override {
    local_ = Buffer();
    reader_.reset();
    owner_.reset();
    DaemonTest::TearDown();
  }

  std::unique_ptr<Client> Connect(const std::string& name) {
    ClientOptions o;
    o.socket = socket();
    o.app_name = name;
    auto c = Client::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(c).value() : nullptr;
  }

  Buffer Patterned(uint64_t size, uint64_t seed) {
    auto b = owner_->Alloc(size);
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    if (!b.ok()) return Buffer();
    FillPattern(b->data(), size, seed);
    return *b;
  }

  // Polls until Resolve(name) fails; its status.
  Status WaitUntilUnresolvable(const std::string& name) {
    Status last;
    PollUntil(
        [&] {
          auto r = reader_->Resolve(name);
          last = r.ok() ? Status() : r.status();
          if (r.ok()) (void)reader_->Release(*r);
          return !r.ok();
        },
        Millis(10000));
    return last;
  }

  std::unique_ptr<Client> owner_;
  std::unique_ptr<Client> reader_;
  Buffer local_;
};

TEST_F(Exports, SubrangeExportExposesOnlyThatRange) {
  Buffer b = Patterned(kMiB, 3);
  ExportOptions eo;
  eo.offset = 4096;
  eo.length = 65536;
  ASSERT_TRUE(owner_->Export(b, "sub", eo).ok());
  auto remote = reader_->Resolve("sub");
  ASSERT_TRUE(remote.ok()) << remote.status().ToString();
  EXPECT_EQ(remote->length, 65536u);
  EXPECT_TRUE(remote->readable);
  EXPECT_FALSE(remote->writable);
  // Remote offset 0 is buffer offset 4096.
  auto n = reader_->Read(*remote, 0, local_, 0, 65536);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 65536u);
  VerifyResult v = VerifyPattern(local_.data(), 65536, 3, 4096);
  EXPECT_TRUE(v.ok) << v.bad_bytes << " bad bytes from " << v.first_bad;
  // An unaligned piece in the middle lands where it should.
  n = reader_->Read(*remote, 1001, local_, 77, 3000);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_TRUE(VerifyPattern(local_.data() + 77, 3000, 3, 4096 + 1001).ok);
  // One byte past the exposed range, and writes: refused by name.
  auto past = reader_->Read(*remote, 65536 - 10, local_, 0, 11);
  EXPECT_EQ(past.status().code(), Code::kOutOfRange) << past.status().ToString();
  auto w = reader_->Write(*remote, 0, local_, 0, 16);
  EXPECT_EQ(w.status().code(), Code::kPermissionDenied) << w.status().ToString();
  EXPECT_TRUE(VerifyPattern(b.data(), kMiB, 3).ok) << "a refused write changed the owner's memory";
}

TEST_F(Exports, DuplicateNamesAndForeignUnexportAreRefused) {
  Buffer b = Patterned(kMiB, 4);
  ASSERT_TRUE(owner_->Export(b, "dup").ok());
  Status again = owner_->Export(b, "dup");
  EXPECT_EQ(again.code(), Code::kAlreadyExists) << again.ToString();
  Status foreign = reader_->Unexport("dup");
  EXPECT_EQ(foreign.code(), Code::kPermissionDenied) << foreign.ToString();
  Status bad_name = owner_->Export(b, "no spaces allowed");
  EXPECT_EQ(bad_name.code(), Code::kInvalid) << bad_name.ToString();
  ExportOptions too_long;
  too_long.offset = kMiB - 100;
  too_long.length = 200;
  Status out = owner_->Export(b, "too-long", too_long);
  EXPECT_EQ(out.code(), Code::kOutOfRange) << out.ToString();
  auto none = reader_->Resolve("never-exported");
  EXPECT_EQ(none.status().code(), Code::kNotFound) << none.status().ToString();
}

TEST_F(Exports, UnexportRevokesResolvedHandlesAndFreesTheName) {
  Buffer b = Patterned(kMiB, 5);
  ASSERT_TRUE(owner_->Export(b, "gone-soon").ok());
  auto remote = reader_->Resolve("gone-soon");
  ASSERT_TRUE(remote.ok());
  ASSERT_TRUE(reader_->Read(*remote, 0, local_, 0, kMiB).ok());
  ASSERT_TRUE(owner_->Unexport("gone-soon").ok());
  auto r = reader_->Read(*remote, 0, local_, 0, kMiB);
  EXPECT_EQ(r.status().code(), Code::kRevoked) << r.status().ToString();
  EXPECT_EQ(reader_->Resolve("gone-soon").status().code(), Code::kNotFound);
  // The name can be exported again, and the new export is a new handle.
  ASSERT_TRUE(owner_->Export(b, "gone-soon").ok());
  auto fresh = reader_->Resolve("gone-soon");
  ASSERT_TRUE(fresh.ok());
  EXPECT_TRUE(reader_->Read(*fresh, 0, local_, 0, kMiB).ok());
  r = reader_->Read(*remote, 0, local_, 0, kMiB);
  EXPECT_EQ(r.status().code(), Code::kRevoked) << "an old handle must not follow a re-export";
}

TEST_F(Exports, FreeingTheBufferRevokesItsExports) {
  Buffer b = Patterned(kMiB, 6);
  ASSERT_TRUE(owner_->Export(b, "freed").ok());
  auto remote = reader_->Resolve("freed");
  ASSERT_TRUE(remote.ok());
  b = Buffer();  // the last copy: the library frees it
  auto r = reader_->Read(*remote, 0, local_, 0, kMiB);
  EXPECT_EQ(r.status().code(), Code::kRevoked) << r.status().ToString();
  EXPECT_EQ(WaitUntilUnresolvable("freed").code(), Code::kNotFound);
}

TEST_F(Exports, TtlExpiryRevokesHandlesAndRemovesTheExport) {
  Buffer b = Patterned(kMiB, 7);
  ExportOptions eo;
  eo.ttl = std::chrono::milliseconds(300);
  ASSERT_TRUE(owner_->Export(b, "short-lived", eo).ok());
  auto remote = reader_->Resolve("short-lived");
  ASSERT_TRUE(remote.ok()) << remote.status().ToString();
  EXPECT_EQ(WaitUntilUnresolvable("short-lived").code(), Code::kNotFound)
      << "the export outlived its TTL by 10 s";
  auto r = reader_->Read(*remote, 0, local_, 0, kMiB);
  EXPECT_EQ(r.status().code(), Code::kRevoked) << r.status().ToString();
  REQUIRE_MCDMACTL();
  v1::ExportsReply exports;
  ASSERT_TRUE(CtlJson("exports", &exports));
  EXPECT_EQ(exports.exports_size(), 0);
}

}  // namespace
}  // namespace mcdma::itest
