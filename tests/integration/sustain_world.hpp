// A world of apps that keep working until something is killed under them:
// an echo server, an exporter, and sustain clients that call the server and
// write/read their own slot of the export, verifying every byte (see
// testapp_stress.cpp). Used by the crash-safety and daemon-lifecycle tests.
#pragma once

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "daemon_fixture.hpp"
#include "test_util.hpp"

namespace mcdma::itest {

inline constexpr uint64_t kSlot = 1 << 20;  // default size of a client's slot of the export
inline constexpr int kClients = 3;
inline const Millis kProgressWait(30000);

class SustainWorld : public DaemonTest {
 protected:
  // An echo server, an exporter of (1 + clients) slots of `slot` bytes (slot
  // 0 holds its own pattern), and `clients` sustain clients, each calling and
  // transferring; returns once every client has done both at least once.
  void StartWorld(uint64_t slot = kSlot, int clients = kClients) {
    server_ = StartReady("serve", {"--service", "echo"});
    ASSERT_NE(server_, nullptr);
    exporter_ = StartReady("fill", {"--export", "shared", "--size",
                                    std::to_string((clients + 1) * slot), "--seed", "11"});
    ASSERT_NE(exporter_, nullptr);
    for (int k = 1; k <= clients; ++k) {
      Child* c = StartReady("sustain",
                            {"--service", "echo", "--export", "shared", "--slot", std::to_string(k),
                             "--slot-bytes", std::to_string(slot), "--read-seed", "11", "--seed",
                             std::to_string(1000 * k), "--own-export", "own-" + std::to_string(k)});
      ASSERT_NE(c, nullptr);
      clients_.push_back(c);
    }
    for (Child* c : clients_) {
      ASSERT_TRUE(c->WaitForPrefix("CALLS", kProgressWait)) << c->Describe();
      ASSERT_TRUE(c->WaitForPrefix("XFERS", kProgressWait)) << c->Describe();
    }
  }

  static uint64_t SessionOf(Child* c) {
    for (const auto& l : c->lines()) {
      if (l.rfind("READY", 0) == 0) return Field(l, "session").value_or(0);
    }
    return 0;
  }

  // Waits until `c` reports more progress of kind `word` than it had so far.
  static bool MakesProgress(Child* c, const std::string& word) {
    c->Drain();
    uint64_t before = 0;
    for (const auto& l : c->lines()) before = std::max(before, ProgressCount(l, word).value_or(0));
    return c
        ->WaitForLine(
            [&](const std::string& l) { return ProgressCount(l, word).value_or(0) > before; },
            kProgressWait)
        .has_value();
  }

  static bool SawFailure(Child* c) {
    c->Drain();
    return !c->LastLineWith("FAIL").empty();
  }

  // No /dev/shm entry appeared that was not there before the daemon started:
  // every segment name is unlinked once both sides have mapped it.
  void ExpectNoNewShmEntries() {
    std::set<std::string> extra;
    bool clean = PollUntil(
        [&] {
          extra.clear();
          for (const auto& n : ListShm()) {
            if (shm_baseline_.count(n) == 0) extra.insert(n);
          }
          return extra.empty();
        },
        Millis(5000));
    std::string names;
    for (const auto& n : extra) names += " " + n;
    EXPECT_TRUE(clean) << "/dev/shm still has mcdma- entries:" << names;
  }

  // Everything the daemon lists for live sessions is unlinked, and none of it
  // belongs to `gone`.
  void ExpectNothingOwnedBy(uint64_t gone, const std::set<std::string>& gone_segments) {
    v1::SessionsReply sessions;
    ASSERT_TRUE(CtlJson("sessions", &sessions));
    for (const auto& s : sessions.sessions()) {
      EXPECT_NE(s.session_id(), gone);
      EXPECT_FALSE(s.mailbox_linked())
          << "session " << s.session_id() << "'s mailbox is still linked";
    }
    v1::ExportsReply exports;
    ASSERT_TRUE(CtlJson("exports", &exports));
    for (const auto& e : exports.exports()) {
      EXPECT_NE(e.owner_session(), gone)
          << "export '" << e.name() << "' of the killed session survived";
    }
    v1::BuffersReply buffers;
    ASSERT_TRUE(CtlJson("buffers", &buffers));
    for (const auto& b : buffers.buffers()) {
      EXPECT_NE(b.owner_session(), gone)
          << "buffer " << b.buffer_id() << " of the killed session survived";
      EXPECT_FALSE(b.segment_linked())
          << "buffer " << b.buffer_id() << "'s segment is still linked";
    }
    auto present = ListShm();
    for (const auto& seg : gone_segments) {
      std::string name = seg.substr(seg.find_first_not_of('/'));
      EXPECT_EQ(present.count(name), 0u)
          << "the killed session's segment " << seg << " is still in /dev/shm";
    }
  }

  // Segment names (mailbox and buffers) the daemon lists for `session`.
  std::set<std::string> SegmentsOf(uint64_t session) {
    std::set<std::string> out;
    v1::SessionsReply sessions;
    if (!CtlJson("sessions", &sessions)) return out;
    for (const auto& s : sessions.sessions()) {
      if (s.session_id() == session) out.insert(s.mailbox_segment());
    }
    v1::BuffersReply buffers;
    if (!CtlJson("buffers", &buffers)) return out;
    for (const auto& b : buffers.buffers()) {
      if (b.owner_session() == session) out.insert(b.segment());
    }
    return out;
  }

  bool SessionListed(uint64_t id) {
    v1::SessionsReply sessions;
    if (!CtlJson("sessions", &sessions)) return true;
    for (const auto& s : sessions.sessions()) {
      if (s.session_id() == id) return true;
    }
    return false;
  }

  Child* server_ = nullptr;
  Child* exporter_ = nullptr;
  std::vector<Child*> clients_;
};

}  // namespace mcdma::itest
