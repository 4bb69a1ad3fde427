// Bulk data across a link: a 1 GiB export on host-b written from host-a and
// read back, then a 1 GiB export on host-a read and written from host-b.
// Every byte is checked twice: by the reader, and by the exporter in its own
// mapping (so a write that only looked right through the daemon fails).
#include <sys/statvfs.h>

#include "test_util.hpp"
#include "two_hosts.hpp"

namespace mcdma::itest {
namespace {

class LinkBulk : public TwoHosts {};

constexpr uint64_t kGiB = uint64_t{1} << 30;
// Over verbs in the emulated VM (Soft-RoCE under TCG, 3-20 MiB/s, with
// rxe dropping ACKs under load): 64 MiB each way, still 8 writes and
// several reads per direction, each one byte-checked.
constexpr uint64_t kVerbsBytes = uint64_t{64} << 20;
const Millis kBulkWait(150000);

uint64_t ShmFreeBytes() {
  struct statvfs st {};
  if (statvfs("/dev/shm", &st) != 0) return 0;
  return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
}

// Runs a write/verify-read app to completion; its result line.
std::string RunToEnd(Child* c) {
  if (c == nullptr) return "";
  auto line = c->WaitForPrefix("{", kBulkWait);
  EXPECT_TRUE(line.has_value()) << "no result line\n" << c->Describe();
  EXPECT_TRUE(ExitedWith(c->WaitExit(Millis(30000)), 0)) << line.value_or("") << c->Describe();
  return line.value_or("");
}

// Asks a fill app to check its own memory against `seed`; its VERIFY line.
std::string ExporterVerify(Child* exporter, uint64_t seed) {
  if (!exporter->WriteStdin("verify " + std::to_string(seed) + "\n")) return "";
  return exporter->WaitForPrefix("VERIFY", Millis(60000)).value_or("");
}

void EndExporter(Child* exporter) {
  exporter->CloseStdin();
  EXPECT_TRUE(ExitedWith(exporter->WaitExit(Millis(30000)), 0)) << exporter->Describe();
}

double MiBps(const std::string& line, uint64_t bytes) {
  uint64_t ms = Field(line, "ms").value_or(0);
  return ms == 0 ? 0.0 : static_cast<double>(bytes >> 20) * 1000.0 / static_cast<double>(ms);
}

TEST_P(LinkBulk, GibibyteEachWayWrittenReadAndVerified) {
  const uint64_t bytes = verbs() ? kVerbsBytes : kGiB;
  // One direction at a time: the export and the other side's local buffer.
  const uint64_t shm_needed = 2 * bytes + (256 << 20);
  const uint64_t free_shm = ShmFreeBytes();
  if (free_shm < shm_needed) {
    GTEST_SKIP() << "/dev/shm has " << (free_shm >> 20) << " MiB free; this test needs "
                 << (shm_needed >> 20) << " MiB (an export plus a local buffer of " << (bytes >> 20)
                 << " MiB)";
  }
  const std::string size_text = std::to_string(bytes);

  // host-a writes host-b's export, host-b checks its memory, host-a reads it back.
  Child* exp_b = StartReady(
      b(), "fill",
      {"--export", "bulk-b", "--size", size_text, "--no-fill", "--allowed-peers", "host-a"});
  ASSERT_NE(exp_b, nullptr);
  std::string w1 = RunToEnd(StartApp(
      a(), "write", {"--export", "bulk-b", "--peer", "host-b", "--seed", "21", "--pieces", "8"}));
  EXPECT_EQ(Field(w1, "ok"), 1u) << w1;
  EXPECT_EQ(Field(w1, "bytes"), bytes) << w1;
  EXPECT_EQ(ExporterVerify(exp_b, 21), "VERIFY ok bytes=" + size_text);
  std::string r1 = RunToEnd(
      StartApp(a(), "verify-read", {"--export", "bulk-b", "--peer", "host-b", "--seed", "21"}));
  EXPECT_EQ(Field(r1, "ok"), 1u) << r1;
  EXPECT_EQ(Field(r1, "bytes"), bytes) << r1;
  EXPECT_EQ(Field(r1, "bad_bytes"), 0u) << r1;
  EndExporter(exp_b);

  // host-b reads host-a's export, then overwrites it; host-a checks its memory.
  Child* exp_a = StartReady(
      a(), "fill",
      {"--export", "bulk-a", "--size", size_text, "--seed", "31", "--allowed-peers", "host-b"});
  ASSERT_NE(exp_a, nullptr);
  std::string r2 = RunToEnd(
      StartApp(b(), "verify-read", {"--export", "bulk-a", "--peer", "host-a", "--seed", "31"}));
  EXPECT_EQ(Field(r2, "ok"), 1u) << r2;
  EXPECT_EQ(Field(r2, "bytes"), bytes) << r2;
  EXPECT_EQ(Field(r2, "bad_bytes"), 0u) << r2;
  std::string w2 = RunToEnd(StartApp(
      b(), "write", {"--export", "bulk-a", "--peer", "host-a", "--seed", "32", "--pieces", "8"}));
  EXPECT_EQ(Field(w2, "ok"), 1u) << w2;
  EXPECT_EQ(Field(w2, "bytes"), bytes) << w2;
  EXPECT_EQ(ExporterVerify(exp_a, 32), "VERIFY ok bytes=" + size_text);
  EndExporter(exp_a);

  std::cerr << (bytes >> 20) << " MiB over " << transport() << ": a writes b " << MiBps(w1, bytes)
            << " MiB/s, a reads b " << MiBps(r1, bytes) << " MiB/s, b reads a " << MiBps(r2, bytes)
            << " MiB/s, b writes a " << MiBps(w2, bytes) << " MiB/s\n";
  auto la = LinkTo(a(), "host-b");
  auto lb = LinkTo(b(), "host-a");
  ASSERT_TRUE(la && lb);
  std::cerr << "host-a link: " << LinkSummary(*la) << "\nhost-b link: " << LinkSummary(*lb) << "\n";
  // Each side counts the transfers its own apps made.
  EXPECT_GE(la->counters().write_bytes(), bytes);
  EXPECT_GE(la->counters().read_bytes(), bytes);
  EXPECT_GE(lb->counters().write_bytes(), bytes);
  EXPECT_GE(lb->counters().read_bytes(), bytes);
  EXPECT_GT(la->counters().writes(), 0u);
  EXPECT_GT(lb->counters().reads(), 0u);
  EXPECT_EQ(la->counters().ops_failed(), 0u);
  EXPECT_EQ(lb->counters().ops_failed(), 0u);
  EXPECT_EQ(la->counters().downs(), 0u);
  EXPECT_EQ(la->state(), "up");
  EXPECT_EQ(la->transport(), transport());
}

INSTANTIATE_TEST_SUITE_P(Hosts, LinkBulk, kHostVariants, HostVariantName);

}  // namespace
}  // namespace mcdma::itest
