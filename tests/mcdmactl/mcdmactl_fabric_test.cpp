// mcdmactl fabric: the table, the JSON and the DOT picture of a FabricReply,
// and the command's refusal when no daemon answers.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "fabric_cmd.hpp"
#include "mcdmactl_test_support.hpp"

namespace mcdma::tools {
namespace {

namespace v1 = mcdma::v1;

v1::FabricReply ThreeHosts() {
  v1::FabricReply r;
  r.set_host_id("host-a");
  r.set_source("etcd");
  r.set_store("etcd://10.0.0.10:2379");
  r.set_fabric_name("lab");
  r.set_store_state("down");
  r.set_store_error("etcd 10.0.0.10:2379: KeepAlive: connection refused\nsecond line");
  r.set_lease_id(0x525ba24947848006);
  r.set_lease_ttl_ms(6000);
  r.set_revision(9);
  r.set_relists(2);
  r.add_addresses("10.101.8.1:7471");
  auto add = [&](const char* host, const char* state, const char* reach) {
    v1::FabricHostView* h = r.add_hosts();
    h->set_host(host);
    h->set_state(state);
    h->set_reach(reach);
    h->set_boot_generation(1796525754492);
    return h;
  };
  v1::FabricHostView* a = add("host-a", "self", "");
  v1::FabricHostView* b = add("host-b", "member", "direct");
  b->set_reach_detail("via c-b");
  b->set_link_state("up");
  b->add_addresses("10.101.8.2:7471");
  v1::FabricHostView* c = add("host-c", "member", "none");
  c->set_reach_detail("none of its addresses is on a subnet of this host's fabric interfaces");
  add("host-d", "evicted", "none");
  for (auto [x, y] : {std::pair{a, "host-b"}, std::pair{b, "host-a"}, std::pair{b, "host-c"},
                      std::pair{c, "host-b"}}) {
    v1::FabricAdjacency* l = x->add_links();
    l->set_peer(y);
    l->set_state("up");
    l->set_transport("tcp");
    l->set_rails_up(1);
    l->set_rtt_us(500);
  }
  // One end only: not an edge.
  v1::FabricAdjacency* half = a->add_links();
  half->set_peer("host-c");
  half->set_state("up");
  return r;
}

TEST(FabricRender, TableNamesTheStoreEveryHostAndWhatHasNoPath) {
  std::ostringstream out;
  ASSERT_TRUE(RenderFabric(ThreeHosts(), OutputFormat::kText, out).ok());
  const std::string text = out.str();
  EXPECT_NE(text.find("fabric lab: etcd etcd://10.0.0.10:2379 (down, lease 525ba24947848006"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("store: etcd 10.0.0.10:2379: KeepAlive: connection refused second line"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("direct via c-b"), std::string::npos) << text;
  EXPECT_NE(text.find("evicted"), std::string::npos) << text;
  EXPECT_NE(text.find("host-c: no direct path and no route: none of its addresses"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("host-d: no direct path"), std::string::npos)
      << "evicted hosts are not listed";
}

TEST(FabricRender, NoFabricSaysHowToConfigureOne) {
  v1::FabricReply r;
  r.set_host_id("host-a");
  std::ostringstream out;
  ASSERT_TRUE(RenderFabric(r, OutputFormat::kText, out).ok());
  EXPECT_NE(out.str().find("no fabric (set fabric.store"), std::string::npos) << out.str();
}

TEST(FabricRender, JsonKeepsEveryField) {
  std::ostringstream out;
  ASSERT_TRUE(RenderFabric(ThreeHosts(), OutputFormat::kJson, out).ok());
  EXPECT_NE(out.str().find("\"store_state\":\"down\""), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("\"reach_detail\":\"via c-b\""), std::string::npos) << out.str();
}

TEST(FabricRender, GraphHasAnEdgeOnlyWhereBothEndsListTheLink) {
  std::ostringstream out;
  ASSERT_TRUE(RenderFabricGraph(ThreeHosts(), out).ok());
  const std::string dot = out.str();
  EXPECT_EQ(dot.rfind("graph fabric {", 0), 0u) << dot;
  EXPECT_NE(dot.find("\"host-a\" [style=bold];"), std::string::npos) << dot;
  EXPECT_NE(dot.find("\"host-d\" [style=dashed];"), std::string::npos) << dot;
  EXPECT_NE(dot.find("\"host-a\" -- \"host-b\" [label=\"tcp, 1 rails, 500 us\"];"),
            std::string::npos)
      << dot;
  EXPECT_NE(dot.find("\"host-b\" -- \"host-c\""), std::string::npos) << dot;
  EXPECT_EQ(dot.find("\"host-a\" -- \"host-c\""), std::string::npos) << dot;
}

TEST(FabricRender, HostileNamesCannotBreakTheDot) {
  v1::FabricReply r;
  v1::FabricHostView* h = r.add_hosts();
  h->set_host("x\"];\n\"evil");
  std::ostringstream out;
  ASSERT_TRUE(RenderFabricGraph(r, out).ok());
  EXPECT_NE(out.str().find(R"("x\"]; \"evil";)"), std::string::npos) << out.str();
}

TEST(FabricCli, WithoutADaemonTheCommandFailsSayingSo) {
  auto o = test_support::Ctl({"--socket", "/nonexistent/mcdma.sock", "fabric"});
  EXPECT_EQ(o.code, 1) << o.out << o.err;
  EXPECT_NE(o.err.find("cannot reach mcdma-rpcd"), std::string::npos) << o.err;
  auto g = test_support::Ctl({"--socket", "/nonexistent/mcdma.sock", "fabric", "graph"});
  EXPECT_EQ(g.code, 1) << g.out << g.err;
}

}  // namespace
}  // namespace mcdma::tools
