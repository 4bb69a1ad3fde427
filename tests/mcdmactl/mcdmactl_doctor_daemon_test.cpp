// mcdmactl doctor's fabric key, daemon, fabric store, peers and path MTU
// checks on fed inputs: real key files (LoadFabricKey's verdict, as doctor
// gathers it) and Status/Links/Fabric replies as the daemon would send them.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "doctor/checks.hpp"
#include "mcdma_auth/fabric_key.hpp"
#include "mcdmactl_doctor_darwin_test_support.hpp"

namespace mcdma::tools::doctor {
namespace {

using darwin_test::Has;

// Defaults, a daemon that answers with peering on and no links yet.
DoctorInputs HealthyDaemonHost() {
  DoctorInputs in;
  EXPECT_TRUE(daemon::Validate(in.config.options).ok());
  in.config.options.verbs_interface = "veth0";
  in.daemon.socket = "/run/mcdma/rpcd.sock";
  in.daemon.reply.set_version("0.1.0");
  in.daemon.reply.set_state("serving");
  in.daemon.links_status = Status::Ok();
  in.daemon.links.set_peering(true);
  in.daemon.links.set_fabric_key_fingerprint("3fa9c01b");
  in.daemon.fabric_status = Status::Ok();
  in.daemon.fabric.set_host_id("spark-1");
  return in;
}

// A Fabric reply from etcd, connected, with this host and `members`.
v1::FabricReply EtcdFabric(std::vector<v1::FabricHostView> members) {
  v1::FabricReply f;
  f.set_host_id("spark-1");
  f.set_source("etcd");
  f.set_store("etcd://10.0.0.10:2379");
  f.set_fabric_name("default");
  f.set_store_state("connected");
  f.set_lease_id(0x525ba24947848006);
  f.set_lease_ttl_ms(6000);
  f.set_revision(9);
  f.set_relists(1);
  v1::FabricHostView* self = f.add_hosts();
  self->set_host("spark-1");
  self->set_state("self");
  for (auto& m : members) *f.add_hosts() = std::move(m);
  return f;
}

v1::FabricHostView Member(const std::string& host, const std::string& state,
                          const std::string& reach, const std::string& link_state) {
  v1::FabricHostView h;
  h.set_host(host);
  h.set_state(state);
  h.set_reach(reach);
  h.set_reach_detail(reach == "direct" ? "direct via c-" + host : "no subnet in common");
  h.set_link_state(link_state);
  return h;
}

class DoctorKeyFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/mcdma-doctor-key-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/fabric.key";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // What doctor_cmd gathers: LoadFabricKey's verdict on the file.
  FabricKeyInput Load() {
    FabricKeyInput key;
    auto loaded = LoadFabricKey(path_);
    key.status = loaded.status();
    if (loaded.ok()) key.fingerprint = loaded->Fingerprint();
    return key;
  }
  std::string dir_;
  std::string path_;
};

TEST_F(DoctorKeyFile, SkipsWithoutAKeyAndFailsOnGroupReadableKey) {
  DoctorInputs in = HealthyDaemonHost();
  CheckResult r = CheckFabricKey(in);
  EXPECT_EQ(r.verdict, Verdict::kSkip);
  EXPECT_EQ(r.summary, "no fabric key: the peer service is off");
  in.config.options.fabric_key = path_;
  in.fabric_key = Load();
  r = CheckFabricKey(in);
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_EQ(r.fix, "mcdmactl fabric-key new " + path_ +
                       ", then copy that file to every host of the fabric");
  ASSERT_TRUE(WriteNewFabricKey(path_, false).ok());
  ASSERT_EQ(chmod(path_.c_str(), 0644), 0);
  in.fabric_key = Load();
  r = CheckFabricKey(in);
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_TRUE(Has(r.detail, "has mode 0644")) << r.detail;
  EXPECT_EQ(r.fix, "chmod 600 " + path_);
}

TEST_F(DoctorKeyFile, WarnsWhenTheDaemonRunsWithAnotherKey) {
  ASSERT_TRUE(WriteNewFabricKey(path_, false).ok());
  DoctorInputs in = HealthyDaemonHost();
  in.config.options.fabric_key = path_;
  in.fabric_key = Load();
  in.daemon.links.set_fabric_key_fingerprint(in.fabric_key.fingerprint);
  CheckResult r = CheckFabricKey(in);
  EXPECT_EQ(r.verdict, Verdict::kOk);
  EXPECT_EQ(r.summary, path_ + " loads (fingerprint " + in.fabric_key.fingerprint + ")");
  in.daemon.links.set_fabric_key_fingerprint("00000000");
  r = CheckFabricKey(in);
  EXPECT_EQ(r.verdict, Verdict::kWarn);
  EXPECT_TRUE(Has(r.detail, "runs with fingerprint 00000000")) << r.detail;
  EXPECT_TRUE(Has(r.fix, "restart it to load " + path_)) << r.fix;
}

TEST(DoctorChecks, UnreachableDaemonFailsAndSkipsPeers) {
  DoctorInputs in = HealthyDaemonHost();
  EXPECT_EQ(CheckDaemon(in).verdict, Verdict::kOk);
  EXPECT_EQ(CheckDaemon(in).summary, "mcdma-rpcd 0.1.0 answers on /run/mcdma/rpcd.sock");
  in.daemon.status = Status(Code::kUnavailable, "failed to connect to all addresses");
  CheckResult r = CheckDaemon(in);
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_TRUE(Has(r.detail, "cannot reach mcdma-rpcd at /run/mcdma/rpcd.sock")) << r.detail;
  EXPECT_TRUE(Has(r.fix, "start it: systemctl start mcdma-rpcd, or run mcdma-rpcd --config"))
      << r.fix;
  auto peers = CheckPeers(in);
  ASSERT_EQ(peers.size(), 1u);
  EXPECT_EQ(peers[0].verdict, Verdict::kSkip);
  EXPECT_EQ(CheckPathMtu(in)[0].verdict, Verdict::kSkip);
}

TEST(DoctorChecks, EachLinkIsJudgedByItsState) {
  DoctorInputs in = HealthyDaemonHost();
  ASSERT_EQ(CheckPeers(in)[0].summary, "no links");
  auto* up = in.daemon.links.add_links();
  up->set_peer("spark-2");
  up->set_state("up");
  up->set_transport("tcp");
  up->set_rtt_avg_us(41.25);
  auto* refused = in.daemon.links.add_links();
  refused->set_peer("spark-3");
  refused->set_state("refused");
  refused->set_last_error("fabric key mismatch: peer 'spark-3' could not prove it holds the key");
  auto* gone = in.daemon.links.add_links();
  gone->set_peer("mac-1");
  gone->set_address("mac-1.lan:7500");
  gone->set_state("reconnecting");
  gone->set_last_error("is unreachable: Connection refused");
  auto peers = CheckPeers(in);
  ASSERT_EQ(peers.size(), 3u);
  EXPECT_EQ(peers[0].verdict, Verdict::kOk);
  EXPECT_EQ(peers[0].summary, "spark-2: up via tcp, rtt 41.2 us");
  EXPECT_EQ(peers[1].verdict, Verdict::kFail);
  EXPECT_EQ(peers[1].summary, "spark-3: refused");
  EXPECT_TRUE(Has(peers[1].detail, "fabric key mismatch")) << peers[1].detail;
  EXPECT_TRUE(Has(peers[1].fix, "on spark-3 must show fabric_key_fingerprint 3fa9c01b"))
      << peers[1].fix;
  EXPECT_EQ(peers[2].verdict, Verdict::kFail);
  EXPECT_EQ(peers[2].summary, "mac-1: unreachable (reconnecting)");
  EXPECT_TRUE(Has(peers[2].detail, "Connection refused")) << peers[2].detail;
  EXPECT_TRUE(Has(peers[2].fix, "open TCP port 7500")) << peers[2].fix;
  for (const auto& p : peers) EXPECT_EQ(p.id, "peers");
}

// The fix follows the refusal's reason, whatever its text says.
TEST(DoctorChecks, ARefusedLinksFixFollowsItsReason) {
  DoctorInputs in = HealthyDaemonHost();
  auto* refused = in.daemon.links.add_links();
  refused->set_peer("spark-3");
  refused->set_state("refused");
  refused->set_last_error("any text at all");
  refused->set_last_error_reason("PEER_IDENTITY");
  EXPECT_TRUE(Has(CheckPeers(in)[0].fix, "make the [[peer]] name spark-3's host_id"))
      << CheckPeers(in)[0].fix;
  refused->set_last_error_reason("TRANSPORT_REFUSED");
  EXPECT_EQ(CheckPeers(in)[0].fix, "set the peer's transport to \"auto\" or \"tcp\"");
  refused->set_last_error("dialed peer 'spark-3' but it says it is 'spark-4'");
  refused->set_last_error_reason("NONE");
  EXPECT_TRUE(Has(CheckPeers(in)[0].fix, "compare fingerprints")) << CheckPeers(in)[0].fix;
}

TEST(DoctorChecks, DifferentMtusOnAVerbsLinkWarn) {
  DoctorInputs in = HealthyDaemonHost();
  auto* link = in.daemon.links.add_links();
  link->set_peer("spark-2");
  link->set_state("up");
  link->set_transport("verbs");
  auto* v = link->mutable_verbs();
  v->set_device("rxe1");
  v->set_peer_device("rxe2");
  v->set_local_mtu(4096);
  v->set_peer_mtu(1024);
  v->set_path_mtu(1024);
  auto mtu = CheckPathMtu(in);
  ASSERT_EQ(mtu.size(), 1u);
  EXPECT_EQ(mtu[0].verdict, Verdict::kWarn);
  EXPECT_EQ(mtu[0].summary, "spark-2: path MTU 1024 (local 4096, peer 1024)");
  EXPECT_TRUE(Has(mtu[0].detail, "negotiated down to path_mtu 1024")) << mtu[0].detail;
  EXPECT_TRUE(Has(mtu[0].fix, "set the same MTU on both interfaces (ip link set veth0 mtu"))
      << mtu[0].fix;
  v->set_local_mtu(1024);
  EXPECT_EQ(CheckPathMtu(in)[0].verdict, Verdict::kOk);
}

// Every RDMA port the daemon opened is one line: a port that is down, or a
// device whose queue-pair budget (apple-tb5: 10) is nearly spent, warns.
TEST(DoctorChecks, EveryRdmaPortIsShownWithItsStateGidAndBudgets) {
  DoctorInputs in = HealthyDaemonHost();
  in.daemon.links.set_peering(true);
  EXPECT_EQ(CheckRdmaPorts(in)[0].verdict, Verdict::kSkip);
  auto add = [&](const char* device, const char* profile, const char* state) {
    v1::LocalVerbs* v = in.daemon.links.add_devices();
    v->set_device(device);
    v->set_port(1);
    v->set_rail(std::string("verbs:") + device + ":1");
    v->set_state(state);
    v->set_gid("0000:0000:0000:0000:0000:ffff:0a00:0b01");
    v->set_profile(profile);
    return v;
  };
  add("ra1", "linux-rc", "ACTIVE");
  v1::LocalVerbs* tb5 = add("ra3", "apple-tb5", "ACTIVE");
  tb5->set_queue_pairs(3);
  tb5->set_max_queue_pairs(10);
  v1::LocalVerbs* down = add("ra2", "linux-rc", "DOWN");
  down->set_port_failure("async event port error");
  auto r = CheckRdmaPorts(in);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].verdict, Verdict::kOk);
  EXPECT_TRUE(Has(r[0].summary, "verbs:ra1:1: ACTIVE, GID 0000:0000:0000:0000:0000:ffff:0a00:0b01"))
      << r[0].summary;
  EXPECT_EQ(r[1].verdict, Verdict::kOk);
  EXPECT_TRUE(Has(r[1].summary, "profile apple-tb5, QPs 3/10")) << r[1].summary;
  EXPECT_EQ(r[2].verdict, Verdict::kWarn);
  EXPECT_TRUE(Has(r[2].detail, "async event port error")) << r[2].detail;
  tb5->set_queue_pairs(9);
  EXPECT_EQ(CheckRdmaPorts(in)[1].verdict, Verdict::kWarn);
  EXPECT_TRUE(Has(CheckRdmaPorts(in)[1].detail, "nearly spent")) << CheckRdmaPorts(in)[1].detail;
}

TEST(DoctorFabricStore, SkipsWithoutAFabricAndSaysHowToJoinOne) {
  DoctorInputs in = HealthyDaemonHost();
  auto r = CheckFabricStore(in);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].id, "fabric_store");
  EXPECT_EQ(r[0].verdict, Verdict::kSkip);
  EXPECT_EQ(r[0].summary,
            "no fabric (set fabric.store = \"etcd://HOST:PORT\" or fabric.file to join one)");
  in.daemon.fabric_status = Status(Code::kInvalid, "unimplemented: Fabric");
  EXPECT_EQ(CheckFabricStore(in)[0].summary, "the daemon did not describe its fabric");
  in.daemon.status = Status(Code::kUnavailable, "connection refused");
  EXPECT_EQ(CheckFabricStore(in)[0].summary, "the daemon is not reachable");
}

// Members without a direct path (relays) and evicted members are no
// warning; the store's state, lease, revision and counts are the summary.
TEST(DoctorFabricStore, AConnectedEtcdIsOkWithItsLeaseRevisionAndMembers) {
  DoctorInputs in = HealthyDaemonHost();
  in.daemon.fabric = EtcdFabric({Member("spark-2", "member", "direct", "up"),
                                 Member("spark-3", "member", "none", ""),
                                 Member("spark-4", "evicted", "direct", "")});
  auto r = CheckFabricStore(in);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].verdict, Verdict::kOk);
  EXPECT_EQ(r[0].summary,
            "etcd etcd://10.0.0.10:2379 connected: lease TTL 6000 ms, revision 9, 2 member(s), 1 "
            "evicted, 1 reached directly");
  EXPECT_TRUE(Has(r[0].detail, "fabric default")) << r[0].detail;
}

TEST(DoctorFabricStore, AFabricFileIsOkWithItsPathAndMembers) {
  DoctorInputs in = HealthyDaemonHost();
  in.daemon.fabric = EtcdFabric({Member("mac-2", "member", "direct", "up")});
  in.daemon.fabric.set_source("file");
  in.daemon.fabric.set_store("/etc/mcdma/fabric.toml");
  in.daemon.fabric.set_store_state("file");
  auto r = CheckFabricStore(in);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].verdict, Verdict::kOk);
  EXPECT_EQ(r[0].summary,
            "file /etc/mcdma/fabric.toml: 1 member(s), 0 evicted, 1 reached directly");
}

TEST(DoctorFabricStore, AStoreDownFailsQuotingItsErrorAndConnectingWarns) {
  DoctorInputs in = HealthyDaemonHost();
  in.daemon.fabric = EtcdFabric({Member("spark-2", "member", "direct", "up")});
  in.daemon.fabric.set_store("etcd://10.0.0.10:2379,10.0.0.11:2379");
  in.daemon.fabric.set_store_state("down");
  in.daemon.fabric.set_store_error(
      "etcd 10.0.0.10:2379: List /mcdma/fabric/default/hosts/: unreachable (no connection "
      "within 2000 ms; failing to connect)");
  auto r = CheckFabricStore(in);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].verdict, Verdict::kFail);
  EXPECT_EQ(r[0].summary, "etcd etcd://10.0.0.10:2379,10.0.0.11:2379 down");
  EXPECT_TRUE(Has(r[0].detail, "unreachable (no connection within 2000 ms")) << r[0].detail;
  EXPECT_TRUE(Has(r[0].fix,
                  "is etcd running (etcdctl --endpoints=10.0.0.10:2379,10.0.0.11:2379 endpoint "
                  "health) and reachable from this host at 10.0.0.10:2379,10.0.0.11:2379"))
      << r[0].fix;
  EXPECT_TRUE(Has(r[0].fix, "links stay up meanwhile")) << r[0].fix;
  EXPECT_FALSE(Healthy(r));
  in.daemon.fabric.set_store_state("connecting");
  in.daemon.fabric.clear_store_error();
  r = CheckFabricStore(in);
  EXPECT_EQ(r[0].verdict, Verdict::kWarn);
  EXPECT_TRUE(Has(r[0].detail, "not reached the store yet: no error recorded yet")) << r[0].detail;
  EXPECT_TRUE(Healthy(r));
}

// Of a direct pair the lower host id dials: the fix says which end to
// look at.
TEST(DoctorFabricStore, ADirectMemberWithoutAnUpLinkWarnsByName) {
  DoctorInputs in = HealthyDaemonHost();
  v1::FabricHostView dialed = Member("spark-3", "member", "direct", "reconnecting");
  dialed.set_dial_address("10.101.8.3:7471");
  in.daemon.fabric = EtcdFabric({Member("spark-2", "member", "direct", "up"), dialed,
                                 Member("spark-4", "member", "direct", "")});
  auto r = CheckFabricStore(in);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].verdict, Verdict::kOk);
  EXPECT_EQ(r[1].id, "fabric_store");
  EXPECT_EQ(r[1].verdict, Verdict::kWarn);
  EXPECT_EQ(r[1].summary, "spark-3: reached directly, link reconnecting");
  EXPECT_TRUE(Has(r[1].detail, "direct via c-spark-3")) << r[1].detail;
  EXPECT_TRUE(Has(r[1].fix, "this host dials 10.101.8.3:7471")) << r[1].fix;
  EXPECT_TRUE(Has(r[1].fix, "is TCP port 7471 open there?")) << r[1].fix;
  EXPECT_EQ(r[2].verdict, Verdict::kWarn);
  EXPECT_EQ(r[2].summary, "spark-4: reached directly, no link");
  EXPECT_TRUE(Has(r[2].fix, "spark-4 dials this host")) << r[2].fix;
  EXPECT_TRUE(Healthy(r));
}

TEST(DoctorBudgets, OkWhenNothingIsNearItsLimit) {
  DoctorInputs in = HealthyDaemonHost();
  v1::Budgets* b = in.daemon.reply.mutable_budgets();
  b->set_max_open_files(1024);
  b->set_open_files(40);
  b->set_shm_capacity(uint64_t{8} << 30);
  b->set_shm_free(uint64_t{7} << 30);
  b->set_max_backlog_bytes_total(512 << 20);
  CheckResult r = CheckBudgets(in);
  EXPECT_EQ(r.verdict, Verdict::kOk) << r.detail;
  EXPECT_TRUE(Has(r.summary, "open files 40/1024")) << r.summary;
}

TEST(DoctorBudgets, NamesTheLimitThatWasHitAndTheBusiestSource) {
  DoctorInputs in = HealthyDaemonHost();
  v1::Budgets* b = in.daemon.reply.mutable_budgets();
  b->set_max_open_files(256);
  b->set_open_files(252);
  b->set_shm_capacity(64 << 20);
  b->set_shm_free(1 << 20);
  v1::ListenerInfo* control = b->add_listeners();
  control->set_name("control");
  control->set_max_per_source(16);
  control->set_refused_per_source(30);
  control->set_busiest_source("uid 1001");
  control->set_busiest_source_open(16);
  b->set_auth_timed_out(3);
  CheckResult r = CheckBudgets(in);
  EXPECT_EQ(r.verdict, Verdict::kFail) << "252 of 256 files and /dev/shm 1/64 free";
  EXPECT_TRUE(Has(r.detail, "open files 252 of 256")) << r.detail;
  EXPECT_TRUE(Has(r.detail, "SHM_FULL")) << r.detail;
  EXPECT_TRUE(Has(r.detail, "limits.max_connections_per_user (16); busiest now: uid 1001"))
      << r.detail;
  EXPECT_TRUE(Has(r.detail, "3 ended by the stage deadline")) << r.detail;
  EXPECT_FALSE(r.fix.empty());
}

TEST(DoctorBudgets, SkipsWhenTheDaemonDoesNotAnswer) {
  DoctorInputs in = HealthyDaemonHost();
  in.daemon.status = Status(Code::kUnavailable, "connection refused");
  EXPECT_EQ(CheckBudgets(in).verdict, Verdict::kSkip);
}

}  // namespace
}  // namespace mcdma::tools::doctor
