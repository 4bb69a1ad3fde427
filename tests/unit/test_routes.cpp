// Routes over the fabric's graph (daemon/src/fabric/routes.hpp) and the
// routed envelope (daemon/src/engine/route_wire.hpp).
#include <gtest/gtest.h>

#include "engine/resources.hpp"
#include "engine/route_wire.hpp"
#include "fabric/routes.hpp"

namespace mcdma::daemon {
namespace {

v1::FabricHostRecord Host(const std::string& id,
                          std::initializer_list<std::pair<const char*, double>> up,
                          const char* instance = "") {
  v1::FabricHostRecord r;
  r.set_host(id);
  r.set_instance(instance);
  for (const auto& [peer, rtt] : up) {
    auto* l = r.add_links();
    l->set_peer(peer);
    l->set_state("up");
    l->set_rtt_us(rtt);
  }
  return r;
}

TEST(FabricRoutes, ALineIsRoutedHopByHop) {
  auto a = Host("a", {{"b", 100}});
  std::map<std::string, v1::FabricHostRecord> others = {
      {"b", Host("b", {{"a", 100}, {"c", 100}})},
      {"c", Host("c", {{"b", 100}, {"d", 100}}, "inst-c")},
      {"d", Host("d", {{"c", 100}, {"e", 100}})},
      {"e", Host("e", {{"d", 100}})}};
  auto routes = fabric::ComputeRoutes(a, others);
  ASSERT_EQ(routes.size(), 4u);
  EXPECT_EQ(routes["b"].hops, (std::vector<std::string>{"b"}));
  EXPECT_EQ(routes["c"].next_hop, "b");
  EXPECT_EQ(routes["c"].instance, "inst-c");
  EXPECT_EQ(routes["e"].hops, (std::vector<std::string>{"b", "c", "d", "e"}));
  // Four links at most: a fifth host further is not routed.
  others["d"] = Host("d", {{"c", 100}, {"e", 100}});
  others["e"] = Host("e", {{"d", 100}, {"f", 100}});
  others["f"] = Host("f", {{"e", 100}});
  routes = fabric::ComputeRoutes(a, others);
  EXPECT_EQ(routes.count("f"), 0u);
}

TEST(FabricRoutes, AnEdgeNeedsBothEndsAndTheFasterPathWins) {
  // a-b-d and a-c-d; a-d listed by a only (half an edge: not used).
  auto a = Host("a", {{"b", 100}, {"c", 100}, {"d", 10}});
  std::map<std::string, v1::FabricHostRecord> others = {
      {"b", Host("b", {{"a", 100}, {"d", 5000}})},
      {"c", Host("c", {{"a", 100}, {"d", 200}})},
      {"d", Host("d", {{"b", 5000}, {"c", 200}})}};
  auto routes = fabric::ComputeRoutes(a, others);
  EXPECT_EQ(routes["d"].hops, (std::vector<std::string>{"c", "d"}));
  // Equal costs: fewer hops, then the smaller list of hosts.
  others["b"] = Host("b", {{"a", 100}, {"d", 200}});
  others["d"] = Host("d", {{"b", 200}, {"c", 200}});
  routes = fabric::ComputeRoutes(a, others);
  EXPECT_EQ(routes["d"].hops, (std::vector<std::string>{"b", "d"}));
  // A link that is not up is no edge.
  others["b"].mutable_links(1)->set_state("reconnecting");
  routes = fabric::ComputeRoutes(a, others);
  EXPECT_EQ(routes["d"].hops, (std::vector<std::string>{"c", "d"}));
}

TEST(RouteWire, EnvelopesRoundTripAndBadOnesAreNamed) {
  link_wire::Header inner;
  inner.type = link_wire::MsgType::kCall;
  inner.id = 42;
  inner.target = 7;
  inner.seq = 3;
  inner.ack = 2;
  std::string payload = "hello over three relays";
  std::string env =
      route_wire::Encode(1, "host-a", "host-e", "ia", "ie", 9, 4, inner, AsBytes(payload));
  std::string why;
  auto e = route_wire::Decode(AsBytes(env), &why);
  ASSERT_TRUE(e.has_value()) << why;
  EXPECT_EQ(e->hops, 1);
  EXPECT_EQ(e->origin, "host-a");
  EXPECT_EQ(e->dest, "host-e");
  EXPECT_EQ(e->origin_instance, "ia");
  EXPECT_EQ(e->dest_instance, "ie");
  EXPECT_EQ(e->sender_epoch, 9u);
  EXPECT_EQ(e->ack_epoch, 4u);
  EXPECT_EQ(e->inner.id, 42u);
  EXPECT_EQ(e->inner.seq, 3u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(e->payload.data()), e->payload.size()),
            payload);
  route_wire::SetHops(env, 3);
  EXPECT_EQ(route_wire::Decode(AsBytes(env), &why)->hops, 3);

  auto refused = [&](std::string bytes, const char* says) {
    std::string w;
    EXPECT_FALSE(route_wire::Decode(AsBytes(bytes), &w).has_value()) << says;
    EXPECT_NE(w.find(says), std::string::npos) << w;
  };
  refused(env.substr(0, 10), "shorter than its route header");
  refused(env.substr(0, env.size() - 1), "inner length is not the rest");
  std::string v2 = env;
  v2[0] = 2;
  refused(v2, "version 2");
  std::string bad_host = route_wire::Encode(0, "a b", "e", "", "", 1, 0, inner, {});
  refused(bad_host, "invalid host");
  std::string no_epoch = route_wire::Encode(0, "a", "e", "", "", 0, 0, inner, {});
  refused(no_epoch, "without a sender epoch");
  link_wire::Header nested = inner;
  nested.type = link_wire::MsgType::kRouted;
  refused(route_wire::Encode(0, "a", "e", "", "", 1, 0, nested, {}), "never routed");
}

TEST(RouteWire, PieceHeadsAndExportAnswersRoundTripAndBadOnesAreNamed) {
  route_wire::PieceHead p;
  p.kind = route_wire::PieceKind::kRead;
  p.offset = (5ull << 30) + 17;
  p.length = route_wire::kMaxPieceBytes;
  std::string bytes(route_wire::kPieceHeadBytes, '\0');
  route_wire::EncodePieceHead(p, reinterpret_cast<std::byte*>(bytes.data()));
  std::string why;
  auto back = route_wire::DecodePieceHead(AsBytes(bytes), &why);
  ASSERT_TRUE(back.has_value()) << why;
  EXPECT_EQ(back->kind, route_wire::PieceKind::kRead);
  EXPECT_EQ(back->offset, p.offset);
  EXPECT_EQ(back->length, p.length);
  auto refused = [&](std::string b, const char* says) {
    std::string w;
    EXPECT_FALSE(route_wire::DecodePieceHead(AsBytes(b), &w).has_value()) << says;
    EXPECT_NE(w.find(says), std::string::npos) << w;
  };
  refused(bytes.substr(0, 23), "shorter than its head");
  std::string kind = bytes;
  kind[0] = 3;
  refused(kind, "unknown kind 3");
  p.length = route_wire::kMaxPieceBytes + 1;
  route_wire::EncodePieceHead(p, reinterpret_cast<std::byte*>(bytes.data()));
  refused(bytes, "of 262145 bytes");
  p.length = 0;
  route_wire::EncodePieceHead(p, reinterpret_cast<std::byte*>(bytes.data()));
  refused(bytes, "of 0 bytes");

  route_wire::ExportAnswer a;
  a.length = 3ull << 30;
  a.allow_write = true;
  a.expires_in_ms = 1234;
  a.instance = "inst-1";
  const std::string enc = route_wire::EncodeExportAnswer(a);
  auto got = route_wire::DecodeExportAnswer(AsBytes(enc), &why);
  ASSERT_TRUE(got.has_value()) << why;
  EXPECT_EQ(got->length, a.length);
  EXPECT_FALSE(got->allow_read);
  EXPECT_TRUE(got->allow_write);
  EXPECT_EQ(got->expires_in_ms, 1234u);
  EXPECT_EQ(got->instance, "inst-1");
  EXPECT_FALSE(route_wire::DecodeExportAnswer(AsBytes(enc.substr(0, 24)), &why).has_value());
  std::string rights = enc;
  rights[8] = 4;
  EXPECT_FALSE(route_wire::DecodeExportAnswer(AsBytes(rights), &why).has_value());
  EXPECT_NE(why.find("rights 4"), std::string::npos) << why;
}

}  // namespace
}  // namespace mcdma::daemon
