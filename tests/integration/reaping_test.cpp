// Crash safety: apps killed with SIGKILL mid-flight are reaped; what they
// owned disappears; everyone else carries on, byte-verified.
#include <signal.h>

#include <algorithm>

#include "sustain_world.hpp"

namespace mcdma::itest {
namespace {

class Reaping : public SustainWorld {
 protected:
  // Kills the exporter of a running world: every client's transfers end in a
  // named error (none hangs), resolving the export again fails NOT_FOUND,
  // calls carry on, and nothing of the exporter's is left.
  void KillExporterAndExpectNamedErrors() {
    const uint64_t exporter_session = SessionOf(exporter_);
    ASSERT_NE(exporter_session, 0u);
    std::set<std::string> exporter_segments = SegmentsOf(exporter_session);
    EXPECT_EQ(exporter_segments.size(), 2u);  // mailbox + the exported buffer

    exporter_->Signal(SIGKILL);
    ASSERT_TRUE(exporter_->WaitExit(Millis(5000)));

    for (Child* c : clients_) {
      // The transfer running on the export fails with a named error...
      auto err = c->WaitForPrefix("XFER_ERR", kProgressWait);
      ASSERT_TRUE(err.has_value())
          << "a reader's transfer did not fail after its exporter was killed\n"
          << c->Describe();
      std::string code = err->substr(err->find_last_of(' ') + 1);
      std::cerr << "reader pid " << c->pid() << " after the exporter was killed: " << *err << "\n";
      EXPECT_TRUE(code == "REVOKED" || code == "PEER_GONE" || code == "NOT_FOUND")
          << "unexpected error for a transfer to a killed exporter: " << *err;
      // ...and resolving the export again finds nothing.
      auto res = c->WaitForPrefix("RESOLVE_ERR", kProgressWait);
      ASSERT_TRUE(res.has_value()) << c->Describe();
      EXPECT_EQ(*res, "RESOLVE_ERR NOT_FOUND");
      // Calls are unaffected.
      EXPECT_TRUE(MakesProgress(c, "CALLS")) << c->Describe();
      EXPECT_FALSE(SawFailure(c)) << c->Describe();
      EXPECT_TRUE(c->Alive());
    }
    EXPECT_TRUE(PollUntil([&] { return !SessionListed(exporter_session); }, Millis(10000)));
    ASSERT_TRUE(DaemonAlive());
    ExpectNothingOwnedBy(exporter_session, exporter_segments);
    v1::ExportsReply exports;
    ASSERT_TRUE(CtlJson("exports", &exports));
    for (const auto& e : exports.exports()) EXPECT_NE(e.name(), "shared");
    ExpectNoNewShmEntries();
  }
};

TEST_F(Reaping, KilledClientIsReaped) {
  REQUIRE_MCDMACTL();
  ASSERT_NO_FATAL_FAILURE(StartWorld());
  Child* victim = clients_[0];
  const uint64_t victim_session = SessionOf(victim);
  ASSERT_NE(victim_session, 0u);
  ASSERT_TRUE(SessionListed(victim_session));
  std::set<std::string> victim_segments = SegmentsOf(victim_session);
  // Its mailbox and its three buffers (own, transfer source and destination).
  EXPECT_EQ(victim_segments.size(), 4u);
  v1::ExportsReply exports;
  ASSERT_TRUE(CtlJson("exports", &exports));
  EXPECT_TRUE(std::any_of(exports.exports().begin(), exports.exports().end(), [&](const auto& e) {
    return e.name() == "own-1" && e.owner_session() == victim_session;
  }));

  victim->Signal(SIGKILL);
  ASSERT_TRUE(victim->WaitExit(Millis(5000)));

  EXPECT_TRUE(PollUntil([&] { return !SessionListed(victim_session); }, Millis(10000)))
      << "the killed session " << victim_session << " is still listed after 10 s";
  ASSERT_TRUE(DaemonAlive());
  ExpectNothingOwnedBy(victim_session, victim_segments);
  v1::StatusReply status;
  ASSERT_TRUE(CtlJson("status", &status));
  EXPECT_GE(status.sessions_reaped(), 1u);
  EXPECT_EQ(status.sessions(), 2u + kClients - 1);
  EXPECT_EQ(status.exports(), 1u + kClients - 1);

  // The survivors' next calls and transfers pass, byte-verified.
  for (size_t i = 1; i < clients_.size(); ++i) {
    EXPECT_TRUE(MakesProgress(clients_[i], "CALLS")) << clients_[i]->Describe();
    EXPECT_TRUE(MakesProgress(clients_[i], "XFERS")) << clients_[i]->Describe();
    EXPECT_FALSE(SawFailure(clients_[i])) << clients_[i]->Describe();
    EXPECT_TRUE(clients_[i]->Alive());
  }
  EXPECT_TRUE(server_->Alive());
  EXPECT_TRUE(exporter_->Alive());
  // The exporter's own memory was written only in the live clients' slots:
  // slot 0 still holds its pattern (a fresh reader checks it end to end).
  Child* reader = StartApp("verify-read",
                           {"--export", "shared", "--seed", "11", "--size", std::to_string(kSlot)});
  ASSERT_NE(reader, nullptr);
  auto line = reader->WaitForPrefix("{", Millis(60000));
  ASSERT_TRUE(line.has_value()) << reader->Describe();
  EXPECT_TRUE(ExitedWith(reader->WaitExit(Millis(30000)), 0)) << *line;
  ExpectNoNewShmEntries();
}

TEST_F(Reaping, KilledExporterFailsReadersWithNamedErrorsNotHangs) {
  REQUIRE_MCDMACTL();
  ASSERT_NO_FATAL_FAILURE(StartWorld());
  KillExporterAndExpectNamedErrors();
}

// The same with 64 MiB transfers, so the kill lands inside long transfers
// whose pieces are still being posted.
TEST_F(Reaping, KilledExporterFailsLargeTransfersNotHangs) {
  REQUIRE_MCDMACTL();
  ASSERT_NO_FATAL_FAILURE(StartWorld(64 << 20, 2));
  KillExporterAndExpectNamedErrors();
}

}  // namespace
}  // namespace mcdma::itest
