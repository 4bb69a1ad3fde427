// mcdmactl's link commands, in-process: RunCli against a fake Admin service
// that answers the link RPCs, asserting on exit codes, on what is printed and
// on what the daemon was asked.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli.hpp"
#include "link_render.hpp"
#include "mcdma/v1/admin.grpc.pb.h"
#include "mcdmactl_test_support.hpp"
#include "rpc/rpc_status.hpp"

namespace mcdma::tools {
namespace {

namespace v1 = mcdma::v1;
using test_support::Ctl;
using test_support::Outcome;

v1::LinksReply TwoLinks() {
  v1::LinksReply r;
  r.set_host_id("spark-1");
  r.set_peering(true);
  r.set_listen("0.0.0.0:7471");
  auto* up = r.add_links();
  up->set_peer("spark-2");
  up->set_state("up");
  up->set_transport_requested("auto");
  up->set_transport("tcp");
  up->set_generation(3);
  up->set_rtt_avg_us(41.25);
  up->set_inflight(2);
  up->mutable_counters()->set_bytes_sent(3ull << 20);
  up->mutable_counters()->set_bytes_received(512);
  up->mutable_counters()->set_calls_out(7);
  up->mutable_counters()->set_calls_in(5);
  auto* down = r.add_links();
  down->set_peer("mac-1");
  down->set_state("refused");
  down->set_transport_requested("verbs");
  down->set_retry_in_ms(2000);
  down->set_last_error("PERMISSION_DENIED: fabric key mismatch\nwith a second line");
  return r;
}

// TwoLinks() with three rails on spark-2: its own connection (the last
// resort), a rail that carries the messages and one held down.
v1::LinksReply TwoLinksWithRails() {
  v1::LinksReply r = TwoLinks();
  v1::LinkInfo* up = r.mutable_links(0);
  v1::RailInfo* own = up->add_rails();
  own->set_index(0);
  own->set_transport("tcp");
  own->set_state("up");
  own->set_last_resort(true);
  own->set_bytes_sent(1258291);  // 1.2 MiB
  own->set_bytes_received(4096);
  v1::RailInfo* fast = up->add_rails();
  fast->set_index(1);
  fast->set_name("tcp:10.1.1.1>10.1.1.2");
  fast->set_transport("tcp");
  fast->set_local("tcp:10.1.1.1");
  fast->set_remote("tcp:10.1.1.2");
  fast->set_state("up");
  fast->set_messages(true);
  fast->set_bytes_sent(3ull << 30);
  fast->set_bytes_received(2ull << 20);
  fast->set_slices(12288);
  fast->set_inflight_bytes(2ull << 20);
  fast->set_throughput_mbps(320.4);
  fast->set_share(0.514);
  fast->set_downs(1);
  v1::RailInfo* held = up->add_rails();
  held->set_index(2);
  held->set_name("tcp:10.1.2.1>10.1.2.2");
  held->set_transport("tcp");
  held->set_local("tcp:10.1.2.1");
  held->set_remote("tcp:10.1.2.2");
  held->set_state("down");
  held->set_bytes_sent(512);
  held->set_slices(3);
  held->set_slices_reissued(3);
  held->set_throughput_mbps(8.25);
  held->set_share(0.486);
  held->set_downs(12);
  held->set_retry_in_ms(1000);
  held->set_last_error("UNAVAILABLE: rail connection reset by peer\nsecond line");
  return r;
}

// Canned link replies; records what it was asked. `refuse` makes every link
// RPC fail with the daemon's "CODE_NAME: message" form, as grpc_status.hpp does.
class FakeLinksAdmin final : public v1::Admin::Service {
 public:
  v1::LinksReply links = TwoLinks();
  grpc::Status refuse = grpc::Status::OK;
  v1::LinkAddRequest added;
  v1::LinkRemoveRequest removed;
  v1::LinkTestRequest tested;

  grpc::Status Links(grpc::ServerContext*, const v1::LinksRequest*, v1::LinksReply* r) override {
    *r = links;
    return refuse;
  }
  grpc::Status LinkAdd(grpc::ServerContext*, const v1::LinkAddRequest* q,
                       v1::LinkAddReply*) override {
    added = *q;
    return refuse;
  }
  grpc::Status LinkRemove(grpc::ServerContext*, const v1::LinkRemoveRequest* q,
                          v1::LinkRemoveReply*) override {
    removed = *q;
    return refuse;
  }
  grpc::Status LinkTest(grpc::ServerContext*, const v1::LinkTestRequest* q,
                        v1::LinkTestReply* r) override {
    tested = *q;
    r->set_transport("tcp");
    r->set_generation(3);
    for (double rtt : {30.5, 10.0, 20.25}) r->add_rtt_us(rtt);
    return refuse;
  }
};

// An Admin service that predates links: every link RPC is UNIMPLEMENTED.
class OldAdmin final : public v1::Admin::Service {};

class McdmactlLinksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/mcdmactl-links-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    socket_ = dir_ + "/rpcd.sock";
    old_socket_ = dir_ + "/old.sock";
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + socket_, grpc::InsecureServerCredentials());
    builder.RegisterService(&fake_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr) << "cannot listen on " << socket_;
    grpc::ServerBuilder old_builder;
    old_builder.AddListeningPort("unix:" + old_socket_, grpc::InsecureServerCredentials());
    old_builder.RegisterService(&old_);
    old_server_ = old_builder.BuildAndStart();
    ASSERT_NE(old_server_, nullptr) << "cannot listen on " << old_socket_;
  }
  void TearDown() override {
    const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(2);
    if (server_) server_->Shutdown(deadline);
    if (old_server_) old_server_->Shutdown(deadline);
    std::filesystem::remove_all(dir_);
  }
  Outcome Run(std::vector<std::string> args) {
    args.insert(args.begin(), {"--socket", socket_});
    return Ctl(std::move(args));
  }

  FakeLinksAdmin fake_;
  OldAdmin old_;
  std::string dir_;
  std::string socket_;
  std::string old_socket_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<grpc::Server> old_server_;
};

TEST_F(McdmactlLinksTest, LinksTableShowsPeerStateTransportAndGeneration) {
  Outcome r = Run({"links"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.err, "");
  const std::string expected =
      "host spark-1, peering on (listen 0.0.0.0:7471)\n"
      "PEER     STATE                   TRANSPORT  GEN  RTT(us)  IN-FLIGHT          TX/RX  "
      "CALLS OUT/IN  LAST ERROR\n"
      "spark-2  up                      tcp          3     41.2          2  3.0 MiB/512 B  "
      "         7/5\n"
      "mac-1    refused, retry in 2.0s  (verbs)      0        -          0        0 B/0 B  "
      "         0/0  PERMISSION_DENIED: fabric key mismatch with a...\n";
  EXPECT_EQ(r.out, expected);
  Outcome alias = Run({"link", "list"});
  ASSERT_EQ(alias.code, kExitOk) << alias.err;
  EXPECT_EQ(alias.out, r.out);
}

// Every RDMA port the daemon opened is a line under the peering line, and
// an RDMA rail names its profile (one host may mix them).
TEST_F(McdmactlLinksTest, LinksShowEveryRdmaPortAndEachRdmaRailsProfile) {
  v1::LinksReply reply = TwoLinks();
  auto port = [&](const char* device, const char* profile, const char* state, uint32_t qps,
                  uint32_t max_qps) {
    v1::LocalVerbs* v = reply.add_devices();
    v->set_device(device);
    v->set_port(1);
    v->set_rail(std::string("verbs:") + device + ":1");
    v->set_state(state);
    v->set_gid("0000:0000:0000:0000:0000:ffff:0a00:0b01");
    v->set_profile(profile);
    v->set_detected_profile("linux-rc");
    v->set_active_mtu(1024);
    v->set_queue_pairs(qps);
    v->set_max_queue_pairs(max_qps);
    return v;
  };
  port("ra1", "linux-rc", "ACTIVE", 2, 0);
  port("ra3", "apple-tb5", "DOWN", 1, 10)->set_port_failure("port went down");
  v1::RailInfo* rail = reply.mutable_links(0)->add_rails();
  rail->set_index(1);
  rail->set_name("verbs:ra1:1>verbs:rb1:1");
  rail->set_transport("verbs");
  rail->set_profile("linux-rc");
  rail->set_local("verbs:ra1:1");
  rail->set_remote("verbs:rb1:1");
  rail->set_device("ra1");
  rail->set_peer_device("rb1");
  rail->set_state("up");
  fake_.links = reply;
  Outcome r = Run({"links"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_NE(r.out.find("rdma verbs:ra1:1: ACTIVE, GID 0000:0000:0000:0000:0000:ffff:0a00:0b01, "
                       "profile linux-rc (device is linux-rc), MTU 1024, QPs 2/-, MRs 0/-\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("rdma verbs:ra3:1: DOWN, GID 0000:0000:0000:0000:0000:ffff:0a00:0b01, "
                       "profile apple-tb5 (device is linux-rc), MTU 1024, QPs 1/10, MRs 0/-, port "
                       "went down\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("rail 1  verbs:ra1:1>verbs:rb1:1 (linux-rc)"), std::string::npos) << r.out;
}

TEST_F(McdmactlLinksTest, LinksShowEachRailUnderItsLink) {
  fake_.links = TwoLinksWithRails();
  Outcome r = Run({"links"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.err, "");
  const std::string expected =
      "host spark-1, peering on (listen 0.0.0.0:7471)\n"
      "PEER     STATE                   TRANSPORT  GEN  RTT(us)  IN-FLIGHT          TX/RX  "
      "CALLS OUT/IN  LAST ERROR\n"
      "spark-2  up                      tcp          3     41.2          2  3.0 MiB/512 B  "
      "         7/5\n"
      "  rail 0  tcp (link)             up                   last resort         -  share 0.00  "
      "tx/rx 1.2 MiB/4.0 KiB  inflight 0 B      reissued 0  downs 0\n"
      "  rail 1  tcp:10.1.1.1>10.1.1.2  up                   msgs         320 MB/s  share 0.51  "
      "tx/rx 3.0 GiB/2.0 MiB  inflight 2.0 MiB  reissued 0  downs 1\n"
      "  rail 2  tcp:10.1.2.1>10.1.2.2  down, retry in 1.0s               8.2 MB/s  share 0.49  "
      "tx/rx 512 B/0 B        inflight 0 B      reissued 3  downs 12  "
      "UNAVAILABLE: rail connection reset by peer se...\n"
      "mac-1    refused, retry in 2.0s  (verbs)      0        -          0        0 B/0 B  "
      "         0/0  PERMISSION_DENIED: fabric key mismatch with a...\n";
  EXPECT_EQ(r.out, expected);
  // --json is the proto: every rail with every field.
  Outcome json = Run({"links", "--json"});
  ASSERT_EQ(json.code, kExitOk) << json.err;
  for (const char* key :
       {"\"rails\":[{\"index\":0,", "\"name\":\"tcp:10.1.1.1\\u003e10.1.1.2\"",
        "\"local\":\"tcp:10.1.1.1\"", "\"last_resort\":true", "\"messages\":true",
        "\"throughput_mbps\":320.4", "\"share\":0.514", "\"slices_reissued\":\"3\"",
        "\"retry_in_ms\":\"1000\"", "\"rails\":[]"}) {
    EXPECT_NE(json.out.find(key), std::string::npos) << key << " in " << json.out;
  }
}

// A link whose only rail is its own connection prints as one without rails.
TEST(McdmactlLinks, RenderLinksPrintsNoRailLinesForTheLinksOwnConnectionAlone) {
  v1::LinksReply plain = TwoLinks();
  v1::LinksReply own_only = TwoLinks();
  v1::RailInfo* own = own_only.mutable_links(0)->add_rails();
  own->set_transport("tcp");
  own->set_state("up");
  own->set_messages(true);
  own->set_bytes_sent(4096);
  std::ostringstream a;
  std::ostringstream b;
  ASSERT_TRUE(RenderLinks(plain, OutputFormat::kText, a).ok());
  ASSERT_TRUE(RenderLinks(own_only, OutputFormat::kText, b).ok());
  EXPECT_EQ(b.str(), a.str());
}

TEST_F(McdmactlLinksTest, LinksWithPeeringOffSaysHowToTurnItOn) {
  fake_.links = v1::LinksReply();
  fake_.links.set_host_id("spark-1");
  Outcome r = Run({"links"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out,
            "host spark-1, peering off\n"
            "no fabric_key configured: create one with `mcdmactl fabric-key new PATH` and start "
            "mcdma-rpcd with --fabric-key PATH\n"
            "no links\n");
}

TEST_F(McdmactlLinksTest, LinksJsonIsTheProtoWithEveryField) {
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"links", "--json"}, {"link", "list", "--json"}}) {
    Outcome r = Run(args);
    ASSERT_EQ(r.code, kExitOk) << r.err;
    EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << r.out;
    // JSON keeps the daemon's text whole, newline escaped.
    const char* const last_error_key =
        "\"last_error\":\"PERMISSION_DENIED: fabric key mismatch\\nwith a second line\"";
    for (const char* key :
         {"\"host_id\":\"spark-1\"", "\"peering\":true", "\"peer\":\"spark-2\"", "\"state\":\"up\"",
          "\"transport\":\"tcp\"", "\"generation\":\"3\"", "\"rtt_avg_us\":41.25",
          "\"bytes_sent\":\"3145728\"", "\"peer\":\"mac-1\"", "\"transport\":\"\"",
          "\"heartbeats_missed\":\"0\"", last_error_key}) {
      EXPECT_NE(r.out.find(key), std::string::npos) << key << " in " << r.out;
    }
  }
}

TEST_F(McdmactlLinksTest, AddSendsPeerAddressAndTransport) {
  Outcome r = Run({"link", "add", "spark-2", "10.0.0.2"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out, "link to spark-2 added (10.0.0.2, transport auto)\n");
  EXPECT_EQ(fake_.added.peer(), "spark-2");
  EXPECT_EQ(fake_.added.address(), "10.0.0.2");
  EXPECT_EQ(fake_.added.transport(), "auto");
  r = Run({"link", "add", "--transport", "verbs", "mac-1", "mac-1.lan:7500"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out, "link to mac-1 added (mac-1.lan:7500, transport verbs)\n");
  EXPECT_EQ(fake_.added.transport(), "verbs");
}

TEST_F(McdmactlLinksTest, RemoveSendsThePeer) {
  Outcome r = Run({"link", "remove", "spark-2"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(r.out, "link to spark-2 removed\n");
  EXPECT_EQ(fake_.removed.peer(), "spark-2");
}

TEST_F(McdmactlLinksTest, TestPrintsEachRoundTripAndTheSummary) {
  Outcome r = Run({"link", "test", "spark-2"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(fake_.tested.peer(), "spark-2");
  EXPECT_EQ(fake_.tested.bytes(), 64u);
  EXPECT_EQ(fake_.tested.count(), 10u);
  EXPECT_EQ(r.out,
            "round trip 1: 64 bytes to spark-2 and back, 30.5 us\n"
            "round trip 2: 64 bytes to spark-2 and back, 10.0 us\n"
            "round trip 3: 64 bytes to spark-2 and back, 20.2 us\n"
            "spark-2 via tcp gen 3: 3 round trips of 64 bytes verified; min/p50/max "
            "10.0/20.2/30.5 us\n");
}

TEST_F(McdmactlLinksTest, TestJsonMergesRequestReplyAndStatistics) {
  Outcome r = Run({"link", "test", "spark-2", "--bytes", "4096", "--count", "3", "--json"});
  ASSERT_EQ(r.code, kExitOk) << r.err;
  EXPECT_EQ(fake_.tested.bytes(), 4096u);
  EXPECT_EQ(fake_.tested.count(), 3u);
  EXPECT_EQ(r.out,
            "{\"peer\":\"spark-2\",\"bytes\":4096,\"count\":3,\"transport\":\"tcp\","
            "\"generation\":\"3\",\"rtt_us\":[30.5,10,20.25],\"min_us\":10,\"p50_us\":20.25,"
            "\"max_us\":30.5}\n");
}

TEST_F(McdmactlLinksTest, DaemonRefusalsPrintTheirCodeAndExitOne) {
  fake_.refuse = rpc::ToGrpc(Status(Code::kNotFound, "no link to mac-9"));
  Outcome r = Run({"link", "remove", "mac-9"});
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "mcdmactl: link remove failed: NOT_FOUND: no link to mac-9\n");
  // UNAVAILABLE from the daemon is about the link, not about reaching it.
  fake_.refuse = rpc::ToGrpc(Status(Code::kLinkDown, "link to spark-2 is down"));
  r = Run({"link", "test", "spark-2"});
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "mcdmactl: link test failed: LINK_DOWN: link to spark-2 is down\n");
  fake_.refuse = rpc::ToGrpc(Status(Code::kInvalid, "address 'x:99999': bad port"));
  r = Run({"link", "add", "spark-3", "x:99999"});
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_EQ(r.err, "mcdmactl: link add failed: INVALID: address 'x:99999': bad port\n");
  fake_.refuse = rpc::ToGrpc(Status(Code::kAlreadyExists, "spark-2 is already linked"));
  r = Run({"link", "add", "spark-2", "10.0.0.2"});
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_EQ(r.err, "mcdmactl: link add failed: ALREADY_EXISTS: spark-2 is already linked\n");
  // A message without the daemon's code prefix keeps gRPC's wording.
  fake_.refuse = grpc::Status(grpc::StatusCode::INTERNAL, "links table corrupt");
  r = Run({"links"});
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_EQ(r.err, "mcdmactl: links failed: INTERNAL: links table corrupt\n");
}

TEST_F(McdmactlLinksTest, OlderDaemonIsReportedAsNotSupported) {
  Outcome r = Ctl({"--socket", old_socket_, "links"});
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_EQ(r.err,
            "mcdmactl: links: not supported by this mcdma-rpcd (older than this mcdmactl)\n");
}

TEST(McdmactlLinks, UnreachableDaemonExitsOneNamingTheSocket) {
  Outcome r = Ctl({"--socket", "/nonexistent/mcdma/rpcd.sock", "link", "test", "spark-2"});
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_EQ(r.err.rfind("mcdmactl: cannot reach mcdma-rpcd at /nonexistent/mcdma/rpcd.sock: ", 0),
            0u)
      << r.err;
}

TEST(McdmactlLinks, UsageErrorsExitTwoWithoutTouchingTheSocket) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"link"},
           {"link", "frob"},
           {"links", "spark-2"},
           {"link", "add"},
           {"link", "add", "spark-2"},
           {"link", "add", "spark-2", "10.0.0.2", "--transport", "rdma"},
           {"link", "remove"},
           {"link", "remove", "a", "b"},
           {"link", "test"},
           {"link", "test", "spark-2", "--count", "0"},
           {"link", "test", "spark-2", "--bytes", "-1"},
           {"link", "test", "spark-2", "--bytes", "many"},
           {"link", "remove", "spark-2", "--json"}}) {
    // A socket nobody listens on: a usage error must be found before it.
    std::vector<std::string> full = {"--socket", "/nonexistent/rpcd.sock"};
    full.insert(full.end(), args.begin(), args.end());
    Outcome r = Ctl(full);
    EXPECT_EQ(r.code, kExitUsage) << "args: " << ::testing::PrintToString(args);
    EXPECT_EQ(r.err.rfind("mcdmactl: ", 0), 0u) << r.err;
    EXPECT_EQ(r.err.find("cannot reach"), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "");
  }
}

TEST(McdmactlLinks, HelpShowsLinkSubcommandsAndDefaults) {
  Outcome link = Ctl({"link", "--help"});
  EXPECT_EQ(link.code, kExitOk);
  for (const char* sub : {"list", "add", "remove", "test"}) {
    EXPECT_NE(link.out.find(sub), std::string::npos) << sub << " in " << link.out;
  }
  Outcome add = Ctl({"link", "add", "--help"});
  EXPECT_EQ(add.code, kExitOk);
  EXPECT_NE(add.out.find("--transport"), std::string::npos) << add.out;
  EXPECT_NE(add.out.find("auto"), std::string::npos) << add.out;
  Outcome test = Ctl({"link", "test", "--help"});
  EXPECT_EQ(test.code, kExitOk);
  EXPECT_NE(test.out.find("--bytes N=64"), std::string::npos) << test.out;
  EXPECT_NE(test.out.find("--count N=10"), std::string::npos) << test.out;
}

TEST(McdmactlLinks, RttStatsAreMinNearestRankMedianAndMax) {
  RttStats s = ComputeRttStats({30.5, 10.0, 20.25});
  EXPECT_EQ(s.min_us, 10.0);
  EXPECT_EQ(s.p50_us, 20.25);
  EXPECT_EQ(s.max_us, 30.5);
  s = ComputeRttStats({4, 1, 3, 2});
  EXPECT_EQ(s.min_us, 1);
  EXPECT_EQ(s.p50_us, 2);  // lower middle of an even count
  EXPECT_EQ(s.max_us, 4);
  s = ComputeRttStats({7});
  EXPECT_EQ(s.min_us, 7);
  EXPECT_EQ(s.p50_us, 7);
  EXPECT_EQ(s.max_us, 7);
  s = ComputeRttStats({});
  EXPECT_EQ(s.min_us, 0);
  EXPECT_EQ(s.p50_us, 0);
  EXPECT_EQ(s.max_us, 0);
  // Untrusted input: NaN and negative samples count as 0, never break sorting.
  s = ComputeRttStats({5, std::nan(""), -3, 9});
  EXPECT_EQ(s.min_us, 0);
  EXPECT_EQ(s.p50_us, 0);
  EXPECT_EQ(s.max_us, 9);
}

TEST(McdmactlLinks, RenderLinksTextAndJsonNameEveryLink) {
  const v1::LinksReply reply = TwoLinks();
  std::ostringstream text;
  ASSERT_TRUE(RenderLinks(reply, OutputFormat::kText, text).ok());
  std::ostringstream json;
  ASSERT_TRUE(RenderLinks(reply, OutputFormat::kJson, json).ok());
  for (const char* word : {"spark-2", "mac-1", "refused", "tcp"}) {
    EXPECT_NE(text.str().find(word), std::string::npos) << word << " in " << text.str();
    EXPECT_NE(json.str().find(word), std::string::npos) << word << " in " << json.str();
  }
}

}  // namespace
}  // namespace mcdma::tools
