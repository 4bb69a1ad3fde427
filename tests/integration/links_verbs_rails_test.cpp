// Rails over RDMA (docs/architecture.md §21): three daemons, each opening
// several Soft-RoCE devices with --rdma, every device port a verbs rail.
// Inside the Soft-RoCE VM only (tests/verbs/guest-init wires the devices and
// exports MCDMA_RAIL_HOSTS and MCDMA_RAIL_WIRE); elsewhere every test skips,
// saying so:
//   host-a: ra1, ra2 (linux-rc, cabled to host-b's rb1, rb2) and ra3
//           (apple-tb5, cabled to host-c's rc1)
//   host-b: rb1, rb2 (linux-rc)        host-c: rc1 (apple-tb5)
// The daemons share the VM's one network namespace (rdma_rxe works only in
// the initial one): each listens on its own ports on 127.0.0.1, so a link's
// rail 0 (its own tcp connection, the last resort) never crosses a rail's
// wire, and host-a dials host-b and host-c with transport "auto". Tests:
//   - host-a's link to host-b has rail 0 and the two cabled pairs up, the
//     cross pairs listed and not up, nothing of ra3 (UC meets only UC); its
//     link to host-c has ra3>rc1 up; a byte-verified transfer to each at
//     once is striped over the verbs rails (rail 0 carries none of it), and
//     calls each way all pass;
//   - the cable of the verbs rail with the most in flight (va1 or va2) taken
//     down a quarter of the way through a 256 MiB byte-verified write and a
//     stream of verified calls: its slices reissued, nothing lost, nothing
//     twice, no error seen by an app, the rail back within 5 s of its
//     interface coming up (by the daemon's up_for_ms) and carrying bytes;
//   - va1 and va2 both down: calls and a verified write go over rail 0 (tcp);
//     back up, the verbs rails return within 5 s and carry the next write.
//   mcdma_integration_tests --gtest_filter='VerbsRails.*'
//
// MCDMA_RAIL_HOSTS="A=END+END+END;B=END+END;C=END", END being
// DEVICE:INTERFACE:IPV4 (an rxe device, the veth end it sits on and that
// end's address); the two ends of a cable share their /24. The test uses
// host A's first three ends, B's first two and C's first; A's first two are
// cabled to B's, A's third to C's. MCDMA_RAIL_WIRE names a script taking
// `down IF` / `up IF` (up also puts back the routes and neighbour entries of
// the cable that taking IF down dropped).
//
// Threading: everything here belongs to the test body's thread.
#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "daemon_fixture.hpp"
#include "harness/daemons.hpp"
#include "harness/hosts.hpp"
#include "mcdma/v1/admin.pb.h"
#include "rails_util.hpp"
#include "test_util.hpp"
#include "two_hosts.hpp"

// A namespace of its own: the tcp rails suite (links_rails_test.cpp) has helpers
// of the same names, and the unity build compiles both in one unit.
namespace mcdma::itest::verbs_rails {
namespace {

using SteadyClock = std::chrono::steady_clock;
using Host = harness::DaemonHost;

const char* const kRc = "linux-rc";
const char* const kUc = "apple-tb5";
// The VM emulates its CPUs: link timing as two_hosts.cpp's verbs variant.
const std::vector<std::string> kVmLinkFlags = {
    "--heartbeat-ms", "1000", "--link-timeout-ms", "8000", "--reconnect-max-ms", "6000"};
const Millis kEndsUpWait(20000);
const Millis kLinkUpWait(30000);
// A cross pair's probe has to time out before it shows "down".
const Millis kRailsUpWait(60000);
// A rail is taken out within 100 ms of its port leaving ACTIVE; what the
// test sees also waits on `mcdmactl links`, which takes up to ~0.6 s under
// TCG.
const Millis kRailDownBound(3000);
// The acceptance bound: a rail whose port is back carries traffic within 5 s.
const Millis kRailBackBound(5000);
// Soft-RoCE under TCG moves 3-20 MiB/s.
const Millis kBulkWait(300000);
const std::string kBulkTimeoutMs = "280000";
constexpr uint64_t kSliceBytes = 256 * kKiB;  // the daemon's default link.slice_bytes
// apple-tb5 registers at most 16384000 bytes at once: host-c's transfers stay
// below.
constexpr uint64_t kUcBytes = 12 * kMiB;

struct RailEnd {
  std::string device;     // "ra1"
  std::string interface;  // "va1"
  std::string address;    // "10.0.11.1"
  std::string profile;    // forced with --rdma
};

std::string RailName(const RailEnd& e) { return "verbs:" + e.device + ":1"; }

// The first three octets: the two ends of a cable share them.
std::string Subnet(const std::string& address) { return address.substr(0, address.rfind('.')); }

bool Cabled(const RailEnd& x, const RailEnd& y) { return Subnet(x.address) == Subnet(y.address); }

bool ProfilesMeet(const std::string& x, const std::string& y) {
  return (x == kUc) == (y == kUc);  // UC meets only UC
}

// MCDMA_RAIL_HOSTS into host letter -> ends; "" on success, else why not.
std::string ParseRailHosts(const std::string& spec,
                           std::map<std::string, std::vector<RailEnd>>* out) {
  std::istringstream hosts(spec);
  std::string host;
  while (std::getline(hosts, host, ';')) {
    size_t eq = host.find('=');
    if (eq == std::string::npos || eq == 0) return "'" + host + "' is not HOST=END[+END...]";
    std::istringstream ends(host.substr(eq + 1));
    std::string end;
    while (std::getline(ends, end, '+')) {
      std::istringstream parts(end);
      RailEnd e;
      if (!std::getline(parts, e.device, ':') || !std::getline(parts, e.interface, ':') ||
          !std::getline(parts, e.address) || e.device.empty() || e.interface.empty() ||
          std::count(e.address.begin(), e.address.end(), '.') != 3) {
        return "'" + end + "' is not DEVICE:INTERFACE:IPV4";
      }
      (*out)[host.substr(0, eq)].push_back(e);
    }
  }
  return "";
}

std::string ReadSys(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

// The RoCE v2 IPv4-mapped GID of `address` as sysfs spells it.
std::string MappedGid(const std::string& address) {
  unsigned o[4] = {};
  std::sscanf(address.c_str(), "%u.%u.%u.%u", &o[0], &o[1], &o[2], &o[3]);
  char gid[64];
  std::snprintf(gid, sizeof(gid), "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x", o[0], o[1],
                o[2], o[3]);
  return gid;
}

// Why `e` cannot carry a rail now ("" when it can): its interface up with
// carrier, its port ACTIVE and its address's GID in the port's table.
std::string EndNotReady(const RailEnd& e) {
  std::string oper = ReadSys("/sys/class/net/" + e.interface + "/operstate");
  if (oper != "up") return e.interface + " is '" + oper + "'";
  const std::string port = "/sys/class/infiniband/" + e.device + "/ports/1/";
  std::string state = ReadSys(port + "state");
  if (state.find("ACTIVE") == std::string::npos) return e.device + " port 1 is '" + state + "'";
  const std::string want = MappedGid(e.address);
  for (int i = 0; i < 16; ++i) {
    if (ReadSys(port + "gids/" + std::to_string(i)) == want) return "";
  }
  return e.device + " has no GID " + want;
}

bool AdminUp(const std::string& interface) {
  return (std::strtoul(ReadSys("/sys/class/net/" + interface + "/flags").c_str(), nullptr, 16) &
          1u) != 0;
}

const v1::RailInfo* RailBetween(const v1::LinkInfo& l, const RailEnd& local,
                                const RailEnd& remote) {
  for (const v1::RailInfo& r : l.rails())
    if (r.local() == RailName(local) && r.remote() == RailName(remote)) return &r;
  return nullptr;
}

uint64_t SlicesOf(const v1::LinkInfo& l, const RailEnd& local, const RailEnd& remote) {
  const v1::RailInfo* r = RailBetween(l, local, remote);
  return r == nullptr ? 0 : r->slices();
}

std::string DevicesSummary(const v1::LinksReply& links) {
  std::ostringstream os;
  for (const v1::LocalVerbs& d : links.devices()) {
    os << "  device " << d.device() << ":" << d.port() << " rail " << d.rail() << " " << d.state()
       << (d.port_failure().empty() ? "" : " (" + d.port_failure() + ")") << " profile "
       << d.profile() << " (detected " << d.detected_profile() << ") gid " << d.gid() << " qps "
       << d.queue_pairs() << "/" << d.max_queue_pairs() << " regs " << d.registrations() << "/"
       << d.max_registrations() << "\n";
  }
  return os.str();
}

class VerbsRails : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_MCDMACTL();
    const char* error = std::getenv("MCDMA_RAIL_ERROR");
    ASSERT_TRUE(error == nullptr) << "the VM's rail wiring failed its checks: " << error;
    const char* spec = std::getenv("MCDMA_RAIL_HOSTS");
    if (spec == nullptr) {
      GTEST_SKIP() << "no Soft-RoCE rail devices here (MCDMA_RAIL_HOSTS is unset); these tests "
                      "run inside the Soft-RoCE VM (tests/verbs/run-vm-tests.sh, ctest "
                      "Verbs.SoftRoce)";
    }
    const char* wire = std::getenv("MCDMA_RAIL_WIRE");
    ASSERT_TRUE(wire != nullptr && *wire != '\0')
        << "MCDMA_RAIL_HOSTS is set but MCDMA_RAIL_WIRE (the script that takes a rail end down "
           "and up) is not";
    wire_ = wire;
    std::map<std::string, std::vector<RailEnd>> hosts;
    std::string bad = ParseRailHosts(spec, &hosts);
    ASSERT_EQ(bad, "") << "MCDMA_RAIL_HOSTS=" << spec;
    ASSERT_GE(hosts["A"].size(), 3u) << "MCDMA_RAIL_HOSTS=" << spec;
    ASSERT_GE(hosts["B"].size(), 2u) << "MCDMA_RAIL_HOSTS=" << spec;
    ASSERT_GE(hosts["C"].size(), 1u) << "MCDMA_RAIL_HOSTS=" << spec;
    a_ends_.assign(hosts["A"].begin(), hosts["A"].begin() + 3);
    b_ends_.assign(hosts["B"].begin(), hosts["B"].begin() + 2);
    c_ends_.assign(hosts["C"].begin(), hosts["C"].begin() + 1);
    ASSERT_TRUE(Cabled(a_ends_[0], b_ends_[0]) && Cabled(a_ends_[1], b_ends_[1]) &&
                Cabled(a_ends_[2], c_ends_[0]) && !Cabled(a_ends_[0], b_ends_[1]))
        << "MCDMA_RAIL_HOSTS: A's first two ends must be cabled to B's, its third to C's: " << spec;
    for (RailEnd* e : {&a_ends_[0], &a_ends_[1], &b_ends_[0], &b_ends_[1]}) e->profile = kRc;
    for (RailEnd* e : {&a_ends_[2], &c_ends_[0]}) e->profile = kUc;
    ASSERT_NO_FATAL_FAILURE(BringEndsUp());

    ASSERT_TRUE(dir_.ok()) << dir_.error();
    const std::string key = dir() + "/fabric.key";
    Status st = harness::WriteFabricKey(key);
    ASSERT_TRUE(st.ok()) << st.message();
    std::vector<uint16_t> ports = harness::FreePorts(6);
    ASSERT_EQ(ports.size(), 6u) << "cannot find free ports on 127.0.0.1: " << std::strerror(errno);
    const std::vector<std::pair<Host*, const std::vector<RailEnd>*>> all = {
        {&a_, &a_ends_}, {&b_, &b_ends_}, {&c_, &c_ends_}};
    for (size_t i = 0; i < all.size(); ++i) {
      Host& h = *all[i].first;
      h.id = harness::HostId(i);
      h.address = "127.0.0.1";
      h.peer_port = ports[2 * i];
      h.data_port = ports[2 * i + 1];
      h.socket = dir() + "/" + h.id.substr(5) + ".sock";
      h.log = dir() + "/daemon-" + h.id + ".log";
      h.key = key;
      h.extra = kVmLinkFlags;
      for (const RailEnd& e : *all[i].second) {
        h.extra.insert(h.extra.end(), {"--rdma", "device=" + e.device + ",port=1,profile=" +
                                                     e.profile + ",interface=" + e.interface});
      }
    }
    a_.peers = {"host-b=" + b_.listen() + ",auto", "host-c=" + c_.listen() + ",auto"};
    for (Host* h : {&c_, &b_, &a_}) {
      Status started = harness::StartDaemon(kDaemonPath, *h, kDaemonListenWait);
      ASSERT_TRUE(started.ok()) << started.message();
    }
    for (auto [h, peer] : {std::pair{&a_, "host-b"}, std::pair{&b_, "host-a"},
                           std::pair{&a_, "host-c"}, std::pair{&c_, "host-a"}}) {
      v1::LinkInfo last;
      ASSERT_TRUE(WaitLink(
          *h, peer, [](const v1::LinkInfo& l) { return l.state() == "up"; }, kLinkUpWait, &last))
          << h->id << "'s link to " << peer << " did not come up within "
          << kLinkUpWait.count() / 1000 << " s:\n"
          << RailsSummary(last) << Describe();
    }
    v1::LinkInfo ab;
    v1::LinkInfo ac;
    ASSERT_TRUE(WaitLink(
        a_, "host-b", [&](const v1::LinkInfo& l) { return AsPlanned(l, b_ends_); }, kRailsUpWait,
        &ab))
        << "host-a's link to host-b did not show rail 0 up (tcp, last resort), the cabled pairs "
           "up, the cross pairs listed and not up and nothing else within "
        << kRailsUpWait.count() / 1000 << " s:\n"
        << RailsSummary(ab) << Describe();
    ASSERT_TRUE(WaitLink(
        a_, "host-c", [&](const v1::LinkInfo& l) { return AsPlanned(l, c_ends_); }, kRailsUpWait,
        &ac))
        << "host-a's link to host-c did not show rail 0 and " << RailName(a_ends_[2]) << ">"
        << RailName(c_ends_[0]) << " up and nothing else within " << kRailsUpWait.count() / 1000
        << " s:\n"
        << RailsSummary(ac) << Describe();
    std::cerr << "host-a's rails once up:\n" << RailsSummary(ab) << RailsSummary(ac);
  }

  void TearDown() override {
    for (auto& app : apps_) app->Kill();
    // A test that failed with an end down leaves it up for the next one.
    for (const std::string& interface : std::set<std::string>(cut_)) Wire("up", interface);
    std::vector<Host*> stopping;
    for (Host* h : {&a_, &b_, &c_}) {
      if (!h->daemon) continue;
      if (h->daemon->Alive()) {
        h->daemon->Signal(SIGTERM);
        stopping.push_back(h);
      } else {
        ADD_FAILURE() << h->id << "'s mcdma-rpcd died during the test: "
                      << DescribeStatus(h->daemon->exit_status().value_or(0));
      }
    }
    for (Host* h : stopping) {
      auto st = h->daemon->WaitExit(Millis(30000));
      if (!st) {
        ADD_FAILURE() << h->id << "'s mcdma-rpcd did not exit within 30 s of SIGTERM";
        h->daemon->Kill();
      } else if (!ExitedWith(st, 0)) {
        ADD_FAILURE() << h->id << "'s mcdma-rpcd ended with " << DescribeStatus(*st)
                      << " after SIGTERM";
      }
    }
    if (HasFailure()) std::cerr << Describe();
    apps_.clear();
    for (Host* h : {&a_, &b_, &c_}) h->daemon.reset();
  }

  const std::string& dir() const { return dir_.path(); }

  // Every rail end up (guest-init leaves host A's ends down until this suite
  // runs; a failed test may have left one down), its port ACTIVE with its
  // GID: a daemon started before then would open a port that is not yet one.
  void BringEndsUp() {
    for (const auto* ends : {&a_ends_, &b_ends_, &c_ends_}) {
      for (const RailEnd& e : *ends) {
        if (!AdminUp(e.interface)) {
          ASSERT_NO_FATAL_FAILURE(Wire("up", e.interface));
        }
      }
    }
    std::string why;
    bool ready = PollUntil(
        [&] {
          why.clear();
          for (const auto* ends : {&a_ends_, &b_ends_, &c_ends_}) {
            for (const RailEnd& e : *ends) {
              std::string not_ready = EndNotReady(e);
              if (!not_ready.empty()) why += not_ready + "; ";
            }
          }
          return why.empty();
        },
        kEndsUpWait, Millis(100));
    ASSERT_TRUE(ready) << "the rail ends are not all ready within " << kEndsUpWait.count() / 1000
                       << " s: " << why;
  }

  // $MCDMA_RAIL_WIRE down|up INTERFACE.
  void Wire(const std::string& cmd, const std::string& interface) {
    CommandResult r = RunCommand({"/bin/bash", wire_, cmd, interface}, Millis(30000));
    if (cmd == "down") cut_.insert(interface);
    if (cmd == "up" && r.exit_code() == 0) cut_.erase(interface);
    ASSERT_EQ(r.exit_code(), 0) << wire_ << " " << cmd << " " << interface << ": " << r.Describe();
  }

  // host-a's link to the host whose ends are `remote`: rail 0 up over tcp
  // and the last resort; every pair of host-a's ends and `remote` whose
  // profiles meet listed, up exactly when cabled, with its device, peer
  // device and profile; no other rail.
  bool AsPlanned(const v1::LinkInfo& l, const std::vector<RailEnd>& remote) const {
    if (l.state() != "up") return false;
    const v1::RailInfo* zero = RailAt(l, 0);
    if (zero == nullptr || zero->state() != "up" || !zero->last_resort() ||
        zero->transport() != "tcp") {
      return false;
    }
    int planned = 1;
    for (const RailEnd& mine : a_ends_) {
      for (const RailEnd& theirs : remote) {
        const v1::RailInfo* r = RailBetween(l, mine, theirs);
        if (!ProfilesMeet(mine.profile, theirs.profile)) {
          if (r != nullptr) return false;
          continue;
        }
        ++planned;
        if (r == nullptr || r->index() == 0 || r->transport() != "verbs") return false;
        if ((r->state() == "up") != Cabled(mine, theirs)) return false;
        if (r->device() != mine.device || r->peer_device() != theirs.device) return false;
        if (r->state() == "up" && (r->port() != 1 || r->profile() != mine.profile)) return false;
      }
    }
    return l.rails_size() == planned;
  }

  std::optional<v1::LinksReply> Links(Host& h, std::string* error = nullptr) {
    auto links = harness::ReadLinks(kCtlPath, h);
    if (!links.ok()) {
      if (error != nullptr) *error = links.status().message();
      return std::nullopt;
    }
    return std::move(links).value();
  }

  std::optional<v1::LinkInfo> LinkTo(Host& h, const std::string& peer) {
    auto links = Links(h);
    if (!links) return std::nullopt;
    const v1::LinkInfo* link = harness::FindLink(*links, peer);
    if (link == nullptr) return std::nullopt;
    return *link;
  }

  v1::LinkInfo Link(Host& h, const std::string& peer) {
    auto l = LinkTo(h, peer);
    EXPECT_TRUE(l.has_value()) << h.id << " lists no link to " << peer;
    return l.value_or(v1::LinkInfo{});
  }

  bool WaitLink(Host& h, const std::string& peer,
                const std::function<bool(const v1::LinkInfo&)>& pred, Millis timeout,
                v1::LinkInfo* last = nullptr) {
    return PollUntil(
        [&] {
          auto l = LinkTo(h, peer);
          if (!l) return false;
          if (last != nullptr) *last = *l;
          return pred(*l);
        },
        timeout, Millis(100));
  }

  // Polls (every 100 ms) host-a's rail `local`>`remote` until `pred`; the
  // delay since `since` when it first held, -1 if not within `bound` (+ 5 s
  // more, to report how late it was).
  int64_t WaitRail(const RailEnd& local, const RailEnd& remote,
                   const std::function<bool(const v1::RailInfo&)>& pred,
                   SteadyClock::time_point since, Millis bound, v1::LinkInfo* last) {
    int64_t seen_ms = -1;
    (void)WaitLink(
        a_, "host-b",
        [&](const v1::LinkInfo& l) {
          const v1::RailInfo* r = RailBetween(l, local, remote);
          if (r == nullptr || !pred(*r)) return false;
          seen_ms = MsSince(since);
          return true;
        },
        bound + Millis(5000), last);
    return seen_ms;
  }

  // Polls host-a's rail `local`>`remote` until it is up; when it came up by
  // the daemon's account (when the answer was seen, less the rail's
  // up_for_ms: never earlier than it really did), in ms since `since`;
  // nullopt if not up within `bound` (+ 5 s). What the test's own polling
  // costs (`mcdmactl links` takes up to ~0.6 s under TCG, and another
  // rail's wiring script may run first) is not the rail's.
  // When an up rail came up, in ms since `since`, by the daemon's account:
  // now (after the answer was read, so never too early) less its up_for_ms.
  static int64_t UpSinceMs(const v1::RailInfo& r, SteadyClock::time_point since) {
    return MsSince(since) - static_cast<int64_t>(r.up_for_ms());
  }

  std::optional<int64_t> WaitRailUp(const RailEnd& local, const RailEnd& remote,
                                    SteadyClock::time_point since, Millis bound,
                                    v1::LinkInfo* last) {
    std::optional<int64_t> up_ms;
    (void)WaitLink(
        a_, "host-b",
        [&](const v1::LinkInfo& l) {
          const v1::RailInfo* r = RailBetween(l, local, remote);
          if (r == nullptr || r->state() != "up") return false;
          up_ms = UpSinceMs(*r, since);
          return true;
        },
        bound + Millis(5000), last);
    return up_ms;
  }

  // `mcdma_testapp ROLE --socket h.socket ARGS...`; stderr to a log file.
  Child* StartApp(Host& h, const std::string& role, const std::vector<std::string>& args) {
    std::vector<std::string> argv = {kTestAppPath, role, "--socket", h.socket};
    argv.insert(argv.end(), args.begin(), args.end());
    SpawnOptions o;
    const std::string label = "app " + std::to_string(apps_.size() + 1) + " on " + h.id;
    o.stderr_path =
        dir() + "/app-" + std::to_string(apps_.size() + 1) + "-" + h.id + "-" + role + ".log";
    auto child = Child::Spawn(argv, o);
    if (!child.ok()) {
      ADD_FAILURE() << "cannot start mcdma_testapp " << role << " on " << h.id << ": "
                    << child.status().message();
      return nullptr;
    }
    apps_.push_back(std::move(child).value());
    app_labels_.push_back(label + ": " + role);
    return apps_.back().get();
  }

  Child* StartReady(Host& h, const std::string& role, const std::vector<std::string>& args) {
    Child* c = StartApp(h, role, args);
    if (c == nullptr) return nullptr;
    if (!c->WaitForPrefix("READY", Millis(30000))) {
      c->WaitExit(Millis(100));
      ADD_FAILURE() << "mcdma_testapp " << role << " on " << h.id
                    << " did not print READY within 30 s\n"
                    << c->Describe();
      return nullptr;
    }
    return c;
  }

  // A fill app on `h` exporting `bytes` (unfilled) to host-a.
  Child* StartExporter(Host& h, const std::string& name, uint64_t bytes) {
    return StartReady(h, "fill",
                      {"--export", name, "--size", std::to_string(bytes), "--no-fill",
                       "--allowed-peers", "host-a"});
  }

  // A write app on host-a filling `peer`'s export `name` with `seed`'s
  // pattern.
  Child* StartWrite(const std::string& peer, const std::string& name, uint64_t seed) {
    return StartApp(a_, "write",
                    {"--export", name, "--peer", peer, "--seed", std::to_string(seed), "--pieces",
                     "4", "--timeout-ms", kBulkTimeoutMs});
  }

  // Runs a write/verify-read/call app to completion; its result line.
  std::string RunToEnd(Child* c) {
    if (c == nullptr) return "";
    auto line = c->WaitForPrefix("{", kBulkWait);
    EXPECT_TRUE(line.has_value()) << "no result line\n" << c->Describe();
    EXPECT_TRUE(ExitedWith(c->WaitExit(Millis(30000)), 0)) << line.value_or("") << "\n"
                                                           << c->Describe();
    return line.value_or("");
  }

  // Runs `writer` to its end and checks it moved `bytes` and that
  // `exporter`'s memory holds `seed`'s pattern; its result line.
  std::string ExpectWritten(Child* writer, Child* exporter, uint64_t seed, uint64_t bytes,
                            const std::string& what) {
    std::string w = RunToEnd(writer);
    EXPECT_EQ(Field(w, "ok"), 1u) << what << ": " << w << "\n" << Describe();
    EXPECT_EQ(Field(w, "bytes"), bytes) << what << ": " << w;
    EXPECT_EQ(ExporterVerify(exporter, seed, Millis(120000)),
              "VERIFY ok bytes=" + std::to_string(bytes))
        << what << ": the exporter's memory is not what host-a wrote\n"
        << Describe();
    return w;
  }

  // Closes the stdin of apps that wait for it; each must then exit 0.
  void EndApps(std::initializer_list<Child*> apps) {
    for (Child* c : apps) {
      if (c == nullptr) continue;
      c->CloseStdin();
      EXPECT_TRUE(ExitedWith(c->WaitExit(Millis(30000)), 0)) << c->Describe();
    }
  }

  // On host-b: an echo server; on host-a: a peer-load app calling it until
  // its stdin closes. Returns once calls pass.
  void StartCallStream() {
    server_ = StartReady(b_, "serve", {"--service", "echo"});
    ASSERT_NE(server_, nullptr);
    stream_ = StartReady(a_, "peer-load",
                         {"--service", "host-b/echo", "--call-threads", "4", "--seed", "500",
                          "--timeout-ms", "30000"});
    ASSERT_NE(stream_, nullptr);
    ASSERT_TRUE(stream_->WaitForPrefix("CALLS", Millis(30000))) << stream_->Describe();
  }

  uint64_t StreamCalls() { return Field(LoadStatus(stream_), "calls_ok").value_or(0); }

  // Ends the call stream: every call passed with its reply verified, and
  // the server handled exactly as many (none lost, none delivered twice).
  void ExpectStreamClean() {
    stream_->CloseStdin();
    auto line = stream_->WaitForPrefix("{", Millis(60000));
    ASSERT_TRUE(line.has_value()) << "the call stream did not finish\n" << stream_->Describe();
    EXPECT_TRUE(ExitedWith(stream_->WaitExit(Millis(10000)), 0)) << stream_->Describe();
    std::cerr << "call stream: " << *line << "\n";
    const uint64_t ok = Field(*line, "calls_ok").value_or(0);
    EXPECT_GT(ok, 0u) << *line;
    EXPECT_EQ(Field(*line, "mismatch"), 0u)
        << "replies that did not match their request: " << *line << "\n"
        << Describe();
    for (const char* cls : {"early", "pre", "post", "lookup_errors"}) {
      EXPECT_TRUE(CodeCounts(*line, cls).empty())
          << "calls failed (" << cls << ") while rails were cut and restored: " << *line << "\n"
          << Describe();
    }
    std::string count = ServerCount(server_);
    std::cerr << "echo server on host-b: " << count << "\n";
    EXPECT_EQ(Field(count, "calls"), ok)
        << "the server handled another number of calls than the caller made (lost or "
           "delivered twice): "
        << count << " vs " << *line << "\n"
        << Describe();
  }

  // The daemons' log tails and every app's output, for failure messages.
  std::string Describe() const {
    std::string out;
    for (const Host* h : {&a_, &b_, &c_}) {
      out += "==== " + h->id + " mcdma-rpcd log (" + h->log + ", tail) ====\n";
      out += harness::LastLines(ReadFile(h->log), 80) + "\n";
    }
    for (size_t i = 0; i < apps_.size(); ++i) {
      out += "==== " + app_labels_[i] + " ====\n" + apps_[i]->Describe();
    }
    return out;
  }

  // The lines of host-a's and host-b's logs about rails (the last 40 of
  // each): what a rail's way back went through, with the daemons' times.
  std::string RailLog() const {
    std::string out;
    for (const Host* h : {&a_, &b_}) {
      std::string lines;
      std::istringstream in(ReadFile(h->log));
      for (std::string line; std::getline(in, line);)
        if (line.find("rail") != std::string::npos) lines += line + "\n";
      out += "==== " + h->id + " mcdma-rpcd log, its rail lines (last 40) ====\n" +
             harness::LastLines(lines, 40) + "\n";
    }
    return out;
  }

  TempDir dir_;
  std::string wire_;
  std::set<std::string> cut_;  // interfaces taken down and not yet back up
  std::vector<RailEnd> a_ends_;
  std::vector<RailEnd> b_ends_;
  std::vector<RailEnd> c_ends_;
  Host a_;
  Host b_;
  Host c_;
  std::vector<std::unique_ptr<Child>> apps_;
  std::vector<std::string> app_labels_;  // "app 3 on host-b: serve", parallel to apps_
  Child* server_ = nullptr;
  Child* stream_ = nullptr;
};

TEST_F(VerbsRails, TwoProfilesTwoPeers) {
  const RailEnd& ra1 = a_ends_[0];
  const RailEnd& ra2 = a_ends_[1];
  const RailEnd& ra3 = a_ends_[2];
  const RailEnd& rb1 = b_ends_[0];
  const RailEnd& rb2 = b_ends_[1];
  const RailEnd& rc1 = c_ends_[0];
  // host-a opened its three ports, each with the profile it was given.
  std::string error;
  auto links_a = Links(a_, &error);
  ASSERT_TRUE(links_a.has_value()) << error;
  const std::string devices = DevicesSummary(*links_a);
  std::cerr << "host-a's devices:\n" << devices;
  ASSERT_EQ(links_a->devices_size(), 3) << devices;
  for (const RailEnd& e : a_ends_) {
    const v1::LocalVerbs* found = nullptr;
    for (const v1::LocalVerbs& d : links_a->devices())
      if (d.device() == e.device) found = &d;
    ASSERT_NE(found, nullptr) << e.device << " is not listed\n" << devices;
    EXPECT_EQ(found->port(), 1u) << devices;
    EXPECT_EQ(found->state(), "ACTIVE") << devices;
    EXPECT_EQ(found->port_failure(), "") << devices;
    EXPECT_EQ(found->profile(), e.profile) << devices;
    EXPECT_FALSE(found->detected_profile().empty()) << devices;
    EXPECT_EQ(Lower(found->gid()), MappedGid(e.address)) << devices;
    EXPECT_EQ(found->rail(), RailName(e)) << devices;
    EXPECT_GT(found->queue_pairs(), 0u) << "a port carrying rails holds no queue pair\n" << devices;
  }
  // The pairs of cables that do not meet stay down, saying why.
  v1::LinkInfo cross;
  EXPECT_TRUE(WaitLink(
      a_, "host-b",
      [&](const v1::LinkInfo& l) {
        for (auto [x, y] : {std::pair{&ra1, &rb2}, std::pair{&ra2, &rb1}}) {
          const v1::RailInfo* r = RailBetween(l, *x, *y);
          if (r == nullptr || r->state() != "down" || r->last_error().empty()) return false;
        }
        return true;
      },
      kRailsUpWait, &cross))
      << "the cross pairs are not shown down with a last_error:\n"
      << RailsSummary(cross);
  // host-b and host-c see the same rails from their side.
  for (const auto& [hb, xb, yb] :
       {std::tuple{&b_, &rb1, &ra1}, std::tuple{&b_, &rb2, &ra2}, std::tuple{&c_, &rc1, &ra3}}) {
    // Lambdas capture plain variables, not structured bindings (C++20 as clang 14 reads it).
    auto* h = hb;
    auto* x = xb;
    auto* y = yb;
    v1::LinkInfo seen;
    EXPECT_TRUE(WaitLink(
        *h, "host-a",
        [&](const v1::LinkInfo& l) {
          const v1::RailInfo* r = RailBetween(l, *x, *y);
          return r != nullptr && r->state() == "up" && r->profile() == x->profile;
        },
        Millis(10000), &seen))
        << h->id << " does not show " << RailName(*x) << ">" << RailName(*y) << " up:\n"
        << RailsSummary(seen);
  }

  // Both transfers at once, calls each way meanwhile.
  const uint64_t ab_bytes = 64 * kMiB;
  const v1::LinkInfo ab0 = Link(a_, "host-b");
  const v1::LinkInfo ac0 = Link(a_, "host-c");
  ASSERT_TRUE(RailAt(ab0, 0) != nullptr && RailAt(ac0, 0) != nullptr);
  Child* server_a = StartReady(a_, "serve", {"--service", "echo"});
  Child* server_b = StartReady(b_, "serve", {"--service", "echo"});
  Child* server_c = StartReady(c_, "serve", {"--service", "echo"});
  Child* export_b = StartExporter(b_, "bulk-b", ab_bytes);
  Child* export_c = StartExporter(c_, "bulk-c", kUcBytes);
  ASSERT_TRUE(server_a && server_b && server_c && export_b && export_c);
  Child* write_b = StartWrite("host-b", "bulk-b", 51);
  Child* write_c = StartWrite("host-c", "bulk-c", 52);
  std::vector<std::pair<std::string, Child*>> callers;
  for (auto [h, service] : {std::pair{&a_, "host-b/echo"}, std::pair{&a_, "host-c/echo"},
                            std::pair{&b_, "host-a/echo"}, std::pair{&c_, "host-a/echo"}}) {
    callers.emplace_back(h->id + " -> " + service,
                         StartApp(*h, "call",
                                  {"--service", service, "--threads", "2", "--calls", "25",
                                   "--depth", "2", "--max-payload", "65536", "--seed",
                                   std::to_string(300 + callers.size()), "--timeout-ms", "60000"}));
  }
  std::string wb = ExpectWritten(write_b, export_b, 51, ab_bytes, "the write to host-b");
  std::string wc = ExpectWritten(write_c, export_c, 52, kUcBytes, "the write to host-c");
  for (auto& [what, c] : callers) {
    std::string r = RunToEnd(c);
    std::cerr << "calls " << what << ": " << r << "\n";
    EXPECT_EQ(Field(r, "ok"), 50u) << what << ": " << r;
    EXPECT_EQ(Field(r, "failed"), 0u) << what << ": " << r;
    EXPECT_EQ(Field(r, "mismatch"), 0u) << what << ": " << r;
  }
  // Each server handled exactly the calls made: none lost, none twice.
  for (auto [server, calls] :
       {std::pair{server_a, 100u}, std::pair{server_b, 50u}, std::pair{server_c, 50u}}) {
    std::string count = ServerCount(server);
    EXPECT_EQ(Field(count, "calls"), uint64_t{calls}) << count;
  }
  // Read back from both, byte-checked.
  std::string rb = RunToEnd(StartApp(
      a_, "verify-read",
      {"--export", "bulk-b", "--peer", "host-b", "--seed", "51", "--timeout-ms", kBulkTimeoutMs}));
  std::string rc = RunToEnd(StartApp(
      a_, "verify-read",
      {"--export", "bulk-c", "--peer", "host-c", "--seed", "52", "--timeout-ms", kBulkTimeoutMs}));
  for (const std::string* r : {&rb, &rc}) {
    EXPECT_EQ(Field(*r, "ok"), 1u) << *r << "\n" << Describe();
    EXPECT_EQ(Field(*r, "bad_bytes"), 0u) << *r;
  }

  const v1::LinkInfo ab = Link(a_, "host-b");
  const v1::LinkInfo ac = Link(a_, "host-c");
  std::cerr << "after the transfers (to host-b " << Field(wb, "ms").value_or(0) << " ms write, "
            << Field(rb, "ms").value_or(0) << " ms read; to host-c " << Field(wc, "ms").value_or(0)
            << " ms write, " << Field(rc, "ms").value_or(0) << " ms read):\n"
            << RailsSummary(ab) << RailsSummary(ac);
  // Striped over both verbs rails to host-b; rail 0 carried none of it.
  for (auto [x, y] : {std::pair{&ra1, &rb1}, std::pair{&ra2, &rb2}}) {
    const v1::RailInfo* r = RailBetween(ab, *x, *y);
    ASSERT_NE(r, nullptr) << RailsSummary(ab);
    EXPECT_EQ(r->state(), "up") << RailsSummary(ab);
    EXPECT_GT(r->slices(), 0u) << "rail " << r->name() << " carried no slice\n" << RailsSummary(ab);
    EXPECT_GE(r->bytes_sent(), 8 * kSliceBytes) << RailsSummary(ab);
    EXPECT_EQ(r->downs(), 0u) << RailsSummary(ab);
  }
  const v1::RailInfo* uc = RailBetween(ac, ra3, rc1);
  ASSERT_NE(uc, nullptr) << RailsSummary(ac);
  EXPECT_EQ(uc->profile(), kUc) << RailsSummary(ac);
  EXPECT_GT(uc->slices(), 0u) << RailsSummary(ac);
  for (auto [l, l0] : {std::pair{&ab, &ab0}, std::pair{&ac, &ac0}}) {
    const v1::RailInfo* zero = RailAt(*l, 0);
    ASSERT_NE(zero, nullptr) << RailsSummary(*l);
    EXPECT_TRUE(zero->last_resort()) << RailsSummary(*l);
    EXPECT_EQ(zero->slices(), RailAt(*l0, 0)->slices())
        << "rail 0 carried one-sided bytes while verbs rails were up\n"
        << RailsSummary(*l);
    EXPECT_LT(zero->bytes_sent() - RailAt(*l0, 0)->bytes_sent(), kSliceBytes)
        << "rail 0 carried bytes of the transfers\n"
        << RailsSummary(*l);
    EXPECT_EQ(l->state(), "up");
    EXPECT_EQ(l->counters().ops_failed(), 0u) << RailsSummary(*l);
    EXPECT_EQ(l->counters().downs(), 0u) << RailsSummary(*l);
  }
  EndApps({server_a, server_b, server_c, export_b, export_c});
}

TEST_F(VerbsRails, CutRailMidTransferAndCalls) {
  const RailEnd& ra1 = a_ends_[0];
  const RailEnd& ra2 = a_ends_[1];
  const RailEnd& rb1 = b_ends_[0];
  const RailEnd& rb2 = b_ends_[1];
  ASSERT_NO_FATAL_FAILURE(StartCallStream());
  const uint64_t bytes = 256 * kMiB;
  Child* exporter = StartExporter(b_, "bulk-b", bytes);
  ASSERT_NE(exporter, nullptr);
  const v1::LinkInfo before = Link(a_, "host-b");
  const uint64_t slices0 = SlicesOf(before, ra1, rb1) + SlicesOf(before, ra2, rb2);

  const auto write_started = SteadyClock::now();
  Child* writer = StartWrite("host-b", "bulk-b", 42);
  ASSERT_NE(writer, nullptr);
  // A quarter of the way: a quarter of the write's slices completed on the
  // two verbs rails. (Half-way, the rest could end while the wiring script
  // runs under emulation, before the cable is down.)
  v1::LinkInfo half;
  ASSERT_TRUE(WaitLink(
      a_, "host-b",
      [&](const v1::LinkInfo& l) {
        writer->Drain();
        if (!writer->LastLineWith("{").empty()) return true;
        return SlicesOf(l, ra1, rb1) + SlicesOf(l, ra2, rb2) - slices0 >= bytes / 4 / kSliceBytes;
      },
      kBulkWait, &half))
      << "the write did not get a quarter of the way within " << kBulkWait.count() / 1000 << " s:\n"
      << RailsSummary(half) << writer->Describe();
  // The cable cut is the one of the rail with the most of the write in
  // flight: the striping keeps refilling it, so it still holds slices when
  // the slow wiring script has taken the cable down (a rail given a small
  // share may have finished its few by then).
  const v1::RailInfo* r1_half = RailBetween(half, ra1, rb1);
  const v1::RailInfo* r2_half = RailBetween(half, ra2, rb2);
  ASSERT_NE(r1_half, nullptr) << RailsSummary(half);
  ASSERT_NE(r2_half, nullptr) << RailsSummary(half);
  const bool first = r1_half->inflight_bytes() >= r2_half->inflight_bytes();
  const RailEnd& cx = first ? ra1 : ra2;
  const RailEnd& cy = first ? rb1 : rb2;
  const v1::RailInfo* cut_half = first ? r1_half : r2_half;
  const bool cut_busy = cut_half->inflight_bytes() > 0;
  const bool cut_messages = cut_half->messages();

  const uint64_t calls_at_cut = StreamCalls();
  const auto cut = SteadyClock::now();
  ASSERT_NO_FATAL_FAILURE(Wire("down", cx.interface));
  const int64_t cut_at_ms = MsSince(write_started);
  writer->Drain();
  const bool write_in_flight = writer->LastLineWith("{").empty();
  v1::LinkInfo down;
  const int64_t down_ms = WaitRail(
      cx, cy, [](const v1::RailInfo& r) { return r.state() != "up"; }, cut, kRailDownBound, &down);
  std::cerr << "ip link set " << cx.interface << " down " << cut_at_ms << " ms into the write ("
            << (SlicesOf(half, ra1, rb1) + SlicesOf(half, ra2, rb2) - slices0) << " slices done, "
            << cx.device << (cut_busy ? " busy" : " idle")
            << (cut_messages ? ", carrying the messages" : "") << "); rail down after " << down_ms
            << " ms:\n"
            << RailsSummary(down);
  EXPECT_GE(down_ms, 0) << "host-a still shows " << RailName(cx) << " up after "
                        << cx.interface << " went down\n"
                        << RailsSummary(down);
  EXPECT_LE(down_ms, kRailDownBound.count()) << RailsSummary(down);
  const v1::RailInfo* cut_down = RailBetween(down, cx, cy);
  ASSERT_NE(cut_down, nullptr) << RailsSummary(down);
  const uint64_t cut_bytes_down = cut_down->bytes_sent();

  while (MsSince(cut) < 1000) std::this_thread::sleep_for(Millis(20));
  const uint64_t calls_at_restore = StreamCalls();
  const int64_t cut_ms = MsSince(cut);
  const auto restored = SteadyClock::now();
  ASSERT_NO_FATAL_FAILURE(Wire("up", cx.interface));
  // Up again by the daemon's account (as WaitRailUp), then carrying again:
  // its bytes grow, seen on the same look where possible (each look is an
  // `mcdmactl links`). If the big write is over, the next one gives it
  // something to carry.
  std::optional<int64_t> back_ms;
  std::optional<int64_t> carry_ms;
  Child* exporter2 = nullptr;
  Child* writer2 = nullptr;
  const uint64_t again = 64 * kMiB;
  bool started_again = true;
  v1::LinkInfo carrying;
  (void)WaitLink(
      a_, "host-b",
      [&](const v1::LinkInfo& l) {
        const v1::RailInfo* r = RailBetween(l, cx, cy);
        if (r == nullptr || r->state() != "up") return false;
        if (!back_ms) back_ms = UpSinceMs(*r, restored);
        if (r->bytes_sent() > cut_bytes_down) {
          carry_ms = MsSince(restored);
          return true;
        }
        writer->Drain();
        if (writer2 == nullptr && !writer->LastLineWith("{").empty()) {
          exporter2 = StartExporter(b_, "again-b", again);
          writer2 = exporter2 == nullptr ? nullptr : StartWrite("host-b", "again-b", 43);
          started_again = writer2 != nullptr;
        }
        return !started_again;
      },
      kRailBackBound + Millis(5000), &carrying);
  ASSERT_TRUE(started_again) << "cannot start the write after the rail came back";
  std::cerr << "RAIL-BACK " << RailName(cx) << ">" << RailName(cy) << " up again "
            << back_ms.value_or(-1) << " ms and seen carrying bytes " << carry_ms.value_or(-1)
            << " ms after ip link set " << cx.interface << " up (down " << cut_ms << " ms)\n"
            << RailsSummary(carrying);
  ASSERT_TRUE(back_ms.has_value())
      << "the rail is not up again even " << (kRailBackBound.count() + 5000)
      << " ms after its port came back:\n"
      << RailsSummary(carrying) << Describe();
  EXPECT_GE(*back_ms, 0) << "the rail was up before its port came back: the cut did not take\n"
                         << RailsSummary(carrying) << RailLog();
  EXPECT_LE(*back_ms, kRailBackBound.count())
      << "the rail was up again later than " << kRailBackBound.count()
      << " ms after its port came back\n"
      << RailsSummary(carrying) << RailLog();
  ASSERT_TRUE(carry_ms.has_value())
      << "the rail carries nothing even " << (kRailBackBound.count() + 5000)
      << " ms after its port came back:\n"
      << RailsSummary(carrying) << Describe();
  EXPECT_LE(*carry_ms, kRailBackBound.count())
      << "the rail was seen carrying bytes again later than " << kRailBackBound.count()
      << " ms after its port came back\n"
      << RailsSummary(carrying) << RailLog();

  EXPECT_TRUE(write_in_flight) << "the write had ended before the cut: the test did not test "
                                  "what it claims";
  std::string w = ExpectWritten(writer, exporter, 42, bytes, "the write across the rail cut");
  EXPECT_GT(calls_at_restore, calls_at_cut)
      << "no call passed while " << cx.interface << " was down (" << calls_at_cut << " -> "
      << calls_at_restore << ")";
  if (writer2 != nullptr) {
    ExpectWritten(writer2, exporter2, 43, again, "the write after the rail came back");
  }

  const v1::LinkInfo after = Link(a_, "host-b");
  std::cerr << "after the write (" << Field(w, "ms").value_or(0) << " ms):\n"
            << RailsSummary(after);
  const v1::RailInfo* cut_rail = RailBetween(after, cx, cy);
  ASSERT_NE(cut_rail, nullptr) << RailsSummary(after);
  EXPECT_GE(cut_rail->downs(), 1u) << "the rail never counted as down\n" << RailsSummary(after);
  // Slices it held when its port went are reissued on ra2; whether it held
  // any is certain only if it was busy just before the cut.
  if (write_in_flight && cut_busy) {
    EXPECT_GE(cut_rail->slices_reissued(), 1u)
        << "the rail was cut with slices of the write in flight, none reissued\n"
        << RailsSummary(after);
  }
  EXPECT_EQ(cut_rail->state(), "up") << RailsSummary(after);
  EXPECT_EQ(after.state(), "up");
  EXPECT_EQ(after.generation(), 1u) << "the link itself went down over a rail cut\n"
                                    << RailsSummary(after);
  EXPECT_EQ(after.counters().downs(), 0u) << RailsSummary(after);
  EXPECT_EQ(after.counters().ops_failed(), 0u) << RailsSummary(after);
  if (auto lb = LinkTo(b_, "host-a")) std::cerr << "host-b's side:\n" << RailsSummary(*lb);

  ASSERT_NO_FATAL_FAILURE(ExpectStreamClean());
  EndApps({exporter, exporter2});
}

TEST_F(VerbsRails, AllRdmaRailsDownFallsBackToTcp) {
  const std::vector<std::pair<const RailEnd*, const RailEnd*>> cabled = {
      {&a_ends_[0], &b_ends_[0]}, {&a_ends_[1], &b_ends_[1]}};
  ASSERT_NO_FATAL_FAILURE(StartCallStream());
  const uint64_t bytes = 64 * kMiB;
  Child* exporter = StartExporter(b_, "bulk-b", bytes);
  ASSERT_NE(exporter, nullptr);
  const v1::LinkInfo before = Link(a_, "host-b");
  ASSERT_NE(RailAt(before, 0), nullptr) << RailsSummary(before);
  const uint64_t zero_slices0 = RailAt(before, 0)->slices();
  const uint64_t zero_bytes0 = RailAt(before, 0)->bytes_sent();

  const auto cut = SteadyClock::now();
  for (auto [x, y] : cabled) ASSERT_NO_FATAL_FAILURE(Wire("down", x->interface));
  v1::LinkInfo down;
  EXPECT_TRUE(WaitLink(
      a_, "host-b",
      [&](const v1::LinkInfo& l) {
        for (auto [x, y] : cabled) {
          const v1::RailInfo* r = RailBetween(l, *x, *y);
          if (r == nullptr || r->state() == "up") return false;
        }
        return true;
      },
      kRailDownBound, &down))
      << "host-a still shows a verbs rail to host-b up after every rail interface went down:\n"
      << RailsSummary(down);
  std::cerr << "every verbs rail to host-b cut; host-a " << MsSince(cut) << " ms later:\n"
            << RailsSummary(down);
  const uint64_t calls_at_cut = StreamCalls();

  std::string w =
      ExpectWritten(StartWrite("host-b", "bulk-b", 44), exporter, 44, bytes, "a write over rail 0");
  EXPECT_TRUE(PollUntil([&] { return StreamCalls() > calls_at_cut + 10; }, Millis(10000)))
      << "calls stopped with every verbs rail down\n"
      << stream_->Describe();
  const v1::LinkInfo during = Link(a_, "host-b");
  std::cerr << "every verbs rail down, after the write (" << Field(w, "ms").value_or(0) << " ms, "
            << MsSince(cut) << " ms after the cut):\n"
            << RailsSummary(during);
  const v1::RailInfo* zero = RailAt(during, 0);
  ASSERT_NE(zero, nullptr) << RailsSummary(during);
  EXPECT_EQ(zero->state(), "up") << RailsSummary(during);
  EXPECT_TRUE(zero->messages()) << "rail 0 does not carry the messages with every rail down\n"
                                << RailsSummary(during);
  EXPECT_GT(zero->slices(), zero_slices0) << "the write did not go over rail 0\n"
                                          << RailsSummary(during);
  EXPECT_GE(zero->bytes_sent() - zero_bytes0, bytes) << RailsSummary(during);
  for (auto [x, y] : cabled) {
    const v1::RailInfo* r = RailBetween(during, *x, *y);
    ASSERT_NE(r, nullptr) << RailsSummary(during);
    EXPECT_NE(r->state(), "up") << RailsSummary(during);
    EXPECT_GE(r->downs(), 1u) << RailsSummary(during);
  }

  while (MsSince(cut) < 2000) std::this_thread::sleep_for(Millis(20));
  const int64_t cut_ms = MsSince(cut);
  // Each port comes back during its own wiring script (`ip link set up`,
  // then its routes and neighbour entries), which under emulation takes a
  // second or more: each rail is timed from the start of its own script.
  std::map<std::string, SteadyClock::time_point> restored;
  for (auto [x, y] : cabled) {
    restored[x->interface] = SteadyClock::now();
    ASSERT_NO_FATAL_FAILURE(Wire("up", x->interface));
    std::cerr << "mcdma-rail-wire up " << x->interface << ": " << MsSince(restored[x->interface])
              << " ms\n";
  }
  for (auto [x, y] : cabled) {
    v1::LinkInfo back;
    const std::optional<int64_t> back_ms =
        WaitRailUp(*x, *y, restored[x->interface], kRailBackBound, &back);
    std::cerr << "RAIL-BACK " << RailName(*x) << ">" << RailName(*y) << " up again "
              << back_ms.value_or(-1) << " ms after its port came back (down " << cut_ms
              << " ms)\n";
    ASSERT_TRUE(back_ms.has_value())
        << RailName(*x) << " not up again even " << (kRailBackBound.count() + 5000)
        << " ms after its port came back:\n"
        << RailsSummary(back) << Describe();
    EXPECT_GE(*back_ms, 0) << RailName(*x)
                           << " was up before its port came back: the cut did not take\n"
                           << RailsSummary(back) << RailLog();
    EXPECT_LE(*back_ms, kRailBackBound.count())
        << RailName(*x) << " came back later than " << kRailBackBound.count()
        << " ms after its port did\n"
        << RailsSummary(back) << RailLog();
  }
  const v1::LinkInfo restored_link = Link(a_, "host-b");
  std::cerr << "verbs rails restored:\n" << RailsSummary(restored_link);
  const v1::RailInfo* zero_r = RailAt(restored_link, 0);
  ASSERT_NE(zero_r, nullptr) << RailsSummary(restored_link);

  // The next write goes over the verbs rails again, none of it on rail 0.
  std::string w2 = ExpectWritten(StartWrite("host-b", "bulk-b", 45), exporter, 45, bytes,
                                 "the write with the verbs rails back");
  const v1::LinkInfo after = Link(a_, "host-b");
  std::cerr << "after the write with the verbs rails back (" << Field(w2, "ms").value_or(0)
            << " ms):\n"
            << RailsSummary(after);
  const v1::RailInfo* zero_after = RailAt(after, 0);
  ASSERT_NE(zero_after, nullptr) << RailsSummary(after);
  EXPECT_TRUE(zero_after->last_resort()) << RailsSummary(after);
  EXPECT_FALSE(zero_after->messages()) << "messages stayed on rail 0 with rails back\n"
                                       << RailsSummary(after);
  EXPECT_EQ(zero_after->slices(), zero_r->slices())
      << "rail 0 carried slices with the verbs rails back\n"
      << RailsSummary(after);
  EXPECT_LT(zero_after->bytes_sent() - zero_r->bytes_sent(), kSliceBytes)
      << "rail 0 carried bytes of the write with the verbs rails back\n"
      << RailsSummary(after);
  for (auto [x, y] : cabled) {
    const v1::RailInfo* r = RailBetween(after, *x, *y);
    ASSERT_NE(r, nullptr) << RailsSummary(after);
    EXPECT_EQ(r->state(), "up") << RailsSummary(after);
    EXPECT_GT(r->slices(), SlicesOf(restored_link, *x, *y))
        << RailName(*x) << " carried no slice of the write after it came back\n"
        << RailsSummary(after);
  }
  // The link never went down: rail 0 carried on without a reconnect.
  EXPECT_EQ(after.state(), "up");
  EXPECT_EQ(after.generation(), 1u) << RailsSummary(after);
  EXPECT_EQ(after.counters().downs(), 0u) << RailsSummary(after);
  EXPECT_EQ(after.counters().ops_failed(), 0u) << RailsSummary(after);

  ASSERT_NO_FATAL_FAILURE(ExpectStreamClean());
  EndApps({exporter});
}

}  // namespace
}  // namespace mcdma::itest::verbs_rails
