// Buffers and exports between two real clients of an in-process daemon:
// one-sided reads and writes land byte for byte, permissions hold, and
// unexported names stop resolving.
#include <string>

#include "inproc_daemon.hpp"
#include "pattern.hpp"

namespace mcdma::itest {
namespace {

class InprocBuffers : public InprocDaemonTest {};

constexpr uint64_t kSize = 1 << 20;

TEST_F(InprocBuffers, ExportIsReadAndWrittenByAnotherSession) {
  Client* owner = Connect("owner");
  Client* user = Connect("user");
  ASSERT_NE(owner, nullptr);
  ASSERT_NE(user, nullptr);
  auto shared = owner->Alloc(kSize);
  ASSERT_TRUE(shared.ok()) << shared.status().ToString();
  FillPattern(shared->data(), kSize, 7);
  ExportOptions eo;
  eo.allow_write = true;
  ASSERT_TRUE(owner->Export(*shared, "inproc.kv", eo).ok());

  auto remote = user->Resolve("inproc.kv");
  ASSERT_TRUE(remote.ok()) << remote.status().ToString();
  EXPECT_EQ(remote->length, kSize);
  EXPECT_TRUE(remote->readable);
  EXPECT_TRUE(remote->writable);
  auto local = user->Alloc(kSize);
  ASSERT_TRUE(local.ok()) << local.status().ToString();
  auto read = user->Read(*remote, 0, *local, 0, kSize);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(*read, kSize);
  VerifyResult v = VerifyPattern(local->data(), kSize, 7);
  EXPECT_TRUE(v.ok) << v.bad_bytes << " bad bytes from " << v.first_bad;

  // A write into the middle changes those bytes only.
  FillPattern(local->data(), 4096, 9);
  auto written = user->Write(*remote, 8192, *local, 0, 4096);
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  EXPECT_EQ(*written, 4096u);
  EXPECT_TRUE(VerifyPattern(shared->data() + 8192, 4096, 9).ok);
  EXPECT_TRUE(VerifyPattern(shared->data(), 8192, 7).ok);
  EXPECT_TRUE(VerifyPattern(shared->data() + 12288, kSize - 12288, 7, 12288).ok);

  auto status = AdminStatus();
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ(status->buffers(), 2u);
  EXPECT_EQ(status->buffer_bytes(), 2 * kSize);
  EXPECT_EQ(status->exports(), 1u);
  EXPECT_EQ(Op(*status, "read").ok(), 1u);
  EXPECT_EQ(Op(*status, "write").ok(), 1u);
  EXPECT_EQ(Op(*status, "read").bytes(), kSize);

  EXPECT_TRUE(user->Release(*remote).ok());
  ASSERT_TRUE(owner->Unexport("inproc.kv").ok());
  auto gone = user->Resolve("inproc.kv");
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.status().code(), Code::kNotFound) << gone.status().ToString();
}

TEST_F(InprocBuffers, ReadOnlyExportRefusesWrites) {
  Client* owner = Connect("owner");
  Client* user = Connect("user");
  ASSERT_NE(owner, nullptr);
  ASSERT_NE(user, nullptr);
  auto shared = owner->Alloc(4096);
  ASSERT_TRUE(shared.ok()) << shared.status().ToString();
  FillPattern(shared->data(), 4096, 3);
  ASSERT_TRUE(owner->Export(*shared, "inproc.ro").ok());
  auto remote = user->Resolve("inproc.ro");
  ASSERT_TRUE(remote.ok()) << remote.status().ToString();
  EXPECT_TRUE(remote->readable);
  EXPECT_FALSE(remote->writable);
  auto local = user->Alloc(4096);
  ASSERT_TRUE(local.ok());
  auto written = user->Write(*remote, 0, *local, 0, 4096);
  ASSERT_FALSE(written.ok());
  EXPECT_EQ(written.status().code(), Code::kPermissionDenied) << written.status().ToString();
  EXPECT_TRUE(VerifyPattern(shared->data(), 4096, 3).ok) << "a refused write changed bytes";
}

}  // namespace
}  // namespace mcdma::itest
