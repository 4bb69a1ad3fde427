// Bulk buffers across processes: one-sided writes and reads through the
// daemon, every byte of 256 MiB verified where it lands.
#include "daemon_fixture.hpp"
#include "test_util.hpp"

namespace mcdma::itest {
namespace {

class Buffers : public DaemonTest {};

constexpr uint64_t kBig = 256ull << 20;
const Millis kTransferWait(180000);

// Runs a one-shot testapp role to its result line; returns the line ("" if
// none) and whether it exited 0.
std::pair<std::string, bool> RunToResult(Child* c) {
  if (c == nullptr) return {"", false};
  auto line = c->WaitForPrefix("{", kTransferWait);
  auto st = c->WaitExit(Millis(30000));
  return {line.value_or(""), ExitedWith(st, 0)};
}

TEST_F(Buffers, Buffer256MiBWrittenByOneProcessReadByAnother) {
  const std::string size = std::to_string(kBig);

  // B writes into A's export; C reads it back through the daemon.
  Child* a = StartReady("fill", {"--export", "big-a", "--size", size, "--no-fill"});
  ASSERT_NE(a, nullptr);
  auto [b_line, b_ok] =
      RunToResult(StartApp("write", {"--export", "big-a", "--seed", "7", "--pieces", "4"}));
  ASSERT_TRUE(b_ok) << "B's remote write failed: " << b_line;
  EXPECT_EQ(Field(b_line, "bytes"), kBig) << b_line;
  // The bytes are in A's own memory, not just somewhere the daemon reads.
  ASSERT_TRUE(a->WriteStdin("verify 7\n"));
  auto verdict = a->WaitForPrefix("VERIFY", kTransferWait);
  ASSERT_TRUE(verdict.has_value()) << a->Describe();
  EXPECT_EQ(*verdict, "VERIFY ok bytes=" + size);
  auto [c_line, c_ok] =
      RunToResult(StartApp("verify-read", {"--export", "big-a", "--seed", "7", "--pieces", "16"}));
  EXPECT_TRUE(c_ok) << "C's read-back failed: " << c_line;
  EXPECT_EQ(Field(c_line, "bytes"), kBig) << c_line;
  EXPECT_EQ(Field(c_line, "bad_bytes"), 0u) << c_line;
  // Control: the verifier does see wrong bytes (another seed's pattern).
  auto [d_line, d_ok] =
      RunToResult(StartApp("verify-read", {"--export", "big-a", "--seed", "8", "--pieces", "3"}));
  EXPECT_FALSE(d_ok) << "a read verified against the wrong pattern passed: " << d_line;
  EXPECT_GT(Field(d_line, "bad_bytes").value_or(0), kBig / 2) << d_line;

  // The reverse direction: A2 fills its own buffer, B2 reads and verifies.
  Child* a2 = StartReady("fill", {"--export", "big-b", "--size", size, "--seed", "9"});
  ASSERT_NE(a2, nullptr);
  auto [r_line, r_ok] =
      RunToResult(StartApp("verify-read", {"--export", "big-b", "--seed", "9", "--pieces", "5"}));
  EXPECT_TRUE(r_ok) << "B2's read of A2's buffer failed: " << r_line;
  EXPECT_EQ(Field(r_line, "bytes"), kBig) << r_line;
  EXPECT_EQ(Field(r_line, "bad_bytes"), 0u) << r_line;
  // A2's memory was only read: still its own pattern.
  ASSERT_TRUE(a2->WriteStdin("verify 9\n"));
  verdict = a2->WaitForPrefix("VERIFY", kTransferWait);
  ASSERT_TRUE(verdict.has_value()) << a2->Describe();
  EXPECT_EQ(*verdict, "VERIFY ok bytes=" + size);

  ASSERT_TRUE(DaemonAlive());
  REQUIRE_MCDMACTL();
  v1::StatusReply status;
  ASSERT_TRUE(CtlJson("status", &status));
  // One 256 MiB write (B) and three 256 MiB reads (C, the control read,
  // which moved its bytes fine, and B2).
  EXPECT_EQ(Op(status, "write").bytes(), kBig);
  EXPECT_EQ(Op(status, "read").bytes(), 3 * kBig);
  EXPECT_EQ(Op(status, "read").failed(), 0u);
  EXPECT_EQ(Op(status, "write").failed(), 0u);
  // Only A and A2 still hold buffers; the one-shot apps' were reclaimed.
  EXPECT_EQ(status.buffers(), 2u);
  EXPECT_EQ(status.buffer_bytes(), 2 * kBig);
}

}  // namespace
}  // namespace mcdma::itest
