// The Prometheus families built from Admin replies, written by
// prometheus-cpp's TextSerializer: names, labels, types, histogram buckets.
#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>

#include <string>

#include "metrics/metric_families.hpp"

namespace mcdma::daemon {
namespace {

std::string Text(const v1::StatusReply& s, const v1::LinksReply& l, const v1::FabricReply& f = {}) {
  return prometheus::TextSerializer().Serialize(MetricFamilies(s, l, f));
}

v1::StatusReply SampleStatus() {
  v1::StatusReply s;
  s.set_version("0.1.0");
  s.set_host_id("host-a");
  s.set_state("serving");
  s.set_sessions(3);
  auto* op = s.add_ops();
  op->set_op("call");
  op->set_submitted(12);
  op->set_bytes(4096);
  auto* ok = op->add_by_code();
  ok->set_code("OK");
  ok->set_count(10);
  auto* nf = op->add_by_code();
  nf->set_code("NOT_FOUND");
  nf->set_count(2);
  auto* lat = op->mutable_latency();
  lat->add_bounds_s(1e-4);
  lat->add_bounds_s(1e-3);
  lat->add_counts(7);
  lat->add_counts(4);
  lat->add_counts(1);  // past the last bound
  lat->set_count(12);
  lat->set_sum_s(0.25);
  s.mutable_budgets()->add_users()->set_uid(1000);
  return s;
}

TEST(MetricFamilies, OperationsByOpAndCodeAndACumulativeHistogram) {
  std::string text = Text(SampleStatus(), {});
  EXPECT_NE(text.find("# TYPE mcdma_operations_total counter"), std::string::npos) << text;
  EXPECT_NE(text.find("mcdma_operations_total{op=\"call\",code=\"OK\"} 10"), std::string::npos)
      << text;
  EXPECT_NE(text.find("mcdma_operations_total{op=\"call\",code=\"NOT_FOUND\"} 2"),
            std::string::npos);
  EXPECT_NE(text.find("mcdma_operations_submitted_total{op=\"call\"} 12"), std::string::npos);
  EXPECT_NE(text.find("mcdma_operation_bytes_total{op=\"call\"} 4096"), std::string::npos);
  EXPECT_NE(text.find("# TYPE mcdma_operation_duration_seconds histogram"), std::string::npos);
  EXPECT_NE(text.find("mcdma_operation_duration_seconds_bucket{op=\"call\",le=\"0.0001\"} 7"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("mcdma_operation_duration_seconds_bucket{op=\"call\",le=\"0.001\"} 11"),
            std::string::npos);
  EXPECT_NE(text.find("mcdma_operation_duration_seconds_bucket{op=\"call\",le=\"+Inf\"} 12"),
            std::string::npos);
  EXPECT_NE(text.find("mcdma_operation_duration_seconds_count{op=\"call\"} 12"), std::string::npos);
  EXPECT_NE(text.find("mcdma_operation_duration_seconds_sum{op=\"call\"} 0.25"), std::string::npos);
  EXPECT_NE(text.find("mcdma_sessions 3"), std::string::npos);
  EXPECT_NE(text.find("mcdma_info{version=\"0.1.0\",host_id=\"host-a\"} 1"), std::string::npos);
  EXPECT_NE(text.find("mcdma_user_sessions{uid=\"1000\"} 0"), std::string::npos);
}

TEST(MetricFamilies, RailsHaveTheirOwnSeries) {
  v1::LinksReply links;
  auto* l = links.add_links();
  l->set_peer("host-b");
  l->set_origin("config");
  l->set_state("up");
  auto* r0 = l->add_rails();
  r0->set_index(0);
  r0->set_name("link");
  r0->set_state("up");
  r0->set_last_resort(true);
  auto* r1 = l->add_rails();
  r1->set_index(1);
  r1->set_name("tcp:10.1.1.1>tcp:10.1.1.2");
  r1->set_state("down");
  r1->set_slices_reissued(12);
  r1->set_downs(1);
  r1->set_throughput_mbps(48.5);
  std::string text = Text(SampleStatus(), links);
  const std::string rail1 =
      "{peer=\"host-b\",origin=\"config\",rail=\"1\",name=\"tcp:10.1.1.1>tcp:10.1.1.2\"}";
  EXPECT_NE(text.find("mcdma_link_rail_up" + rail1 + " 0"), std::string::npos) << text;
  EXPECT_NE(text.find("mcdma_link_rail_slices_reissued_total" + rail1 + " 12"), std::string::npos);
  EXPECT_NE(text.find("mcdma_link_rail_downs_total" + rail1 + " 1"), std::string::npos);
  EXPECT_NE(text.find("mcdma_link_rail_throughput_bytes_per_second" + rail1 + " 48500000"),
            std::string::npos);
  EXPECT_NE(text.find("mcdma_link_rail_last_resort{peer=\"host-b\",origin=\"config\",rail=\"0\","
                      "name=\"link\"} 1"),
            std::string::npos);
}

TEST(MetricFamilies, EveryRdmaPortHasItsStateAndBudgets) {
  v1::LinksReply links;
  auto* v = links.add_devices();
  v->set_device("rdma_en2");
  v->set_port(1);
  v->set_profile("apple-tb5");
  v->set_state("DOWN");
  v->set_queue_pairs(4);
  v->set_max_queue_pairs(10);
  v->set_registrations(7);
  v->set_max_registrations(100);
  std::string text = Text(SampleStatus(), links);
  const std::string port = "{device=\"rdma_en2\",port=\"1\",profile=\"apple-tb5\"}";
  EXPECT_NE(text.find("mcdma_rdma_port_active" + port + " 0"), std::string::npos) << text;
  EXPECT_NE(text.find("mcdma_rdma_port_queue_pairs" + port + " 4"), std::string::npos) << text;
  EXPECT_NE(text.find("mcdma_rdma_port_queue_pairs_max" + port + " 10"), std::string::npos);
  EXPECT_NE(text.find("mcdma_rdma_port_registrations" + port + " 7"), std::string::npos);
  EXPECT_NE(text.find("mcdma_rdma_port_registrations_max" + port + " 100"), std::string::npos);
}

TEST(MetricFamilies, LinksHaveOneStateSeriesPerStateAndTheirCounters) {
  v1::LinksReply links;
  auto* l = links.add_links();
  l->set_peer("host-b");
  l->set_state("reconnecting");
  l->set_transport("tcp");
  l->set_generation(4);
  l->set_rtt_avg_us(250);
  l->mutable_counters()->set_reconnects(3);
  std::string text = Text(SampleStatus(), links);
  EXPECT_NE(text.find("mcdma_link_state{peer=\"host-b\",state=\"reconnecting\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("mcdma_link_state{peer=\"host-b\",state=\"up\"} 0"), std::string::npos);
  EXPECT_NE(text.find("mcdma_link_generation{peer=\"host-b\"} 4"), std::string::npos);
  EXPECT_NE(text.find("mcdma_link_reconnects_total{peer=\"host-b\"} 3"), std::string::npos);
  EXPECT_NE(text.find("mcdma_link_rtt_seconds{peer=\"host-b\"} 0.00025"), std::string::npos);
  // Each family appears once, with one HELP and one TYPE line.
  size_t first = text.find("# TYPE mcdma_link_state gauge");
  ASSERT_NE(first, std::string::npos);
  EXPECT_EQ(text.find("# TYPE mcdma_link_state gauge", first + 1), std::string::npos);
}

v1::FabricHostView* AddHost(v1::FabricReply& f, const char* host, const char* state,
                            const char* reach) {
  v1::FabricHostView* h = f.add_hosts();
  h->set_host(host);
  h->set_state(state);
  h->set_reach(reach);
  return h;
}

// An etcd fabric: this host, two members (one reached directly, one
// through none) and an evicted one.
v1::FabricReply SampleFabric() {
  v1::FabricReply f;
  f.set_host_id("host-a");
  f.set_source("etcd");
  f.set_store("etcd://10.0.0.10:2379");
  f.set_store_state("connected");
  f.set_revision(42);
  f.set_relists(3);
  AddHost(f, "host-a", "self", "");
  AddHost(f, "host-b", "member", "direct");
  AddHost(f, "host-c", "member", "none");
  AddHost(f, "host-d", "evicted", "direct");
  return f;
}

TEST(MetricFamilies, FabricFamiliesCountMembersAndFollowTheStore) {
  std::string text = Text(SampleStatus(), {}, SampleFabric());
  for (const char* family : {"mcdma_fabric_store_up gauge", "mcdma_fabric_members gauge",
                             "mcdma_fabric_members_direct gauge",
                             "mcdma_fabric_relists_total counter", "mcdma_fabric_revision gauge"}) {
    const std::string type = std::string("# TYPE ") + family;
    const size_t at = text.find(type);
    EXPECT_NE(at, std::string::npos) << type << " in\n" << text;
    EXPECT_EQ(text.find(type, at + 1), std::string::npos) << type << " twice";
    const std::string name(family, std::string(family).find(' '));
    EXPECT_NE(text.find("# HELP " + name + " "), std::string::npos) << name;
  }
  EXPECT_NE(text.find("mcdma_fabric_store_up{source=\"etcd\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("mcdma_fabric_members{state=\"member\"} 2"), std::string::npos);
  EXPECT_NE(text.find("mcdma_fabric_members{state=\"evicted\"} 1"), std::string::npos);
  EXPECT_NE(text.find("mcdma_fabric_members_direct 1"), std::string::npos);
  EXPECT_NE(text.find("mcdma_fabric_relists_total 3"), std::string::npos);
  EXPECT_NE(text.find("mcdma_fabric_revision 42"), std::string::npos);
}

TEST(MetricFamilies, RelaysAndRoutedLinksAreCountedByReasonAndPeer) {
  v1::FabricReply f = SampleFabric();
  v1::FabricRelay* r = f.mutable_relay();
  r->set_forwarded(1200);
  r->set_forwarded_bytes(5u << 20);
  r->set_delivered(300);
  r->set_dropped_hop_limit(2);
  r->set_dropped_full(5);
  v1::FabricRoutedLink* l = r->add_routed();
  l->set_peer("host-e");
  l->set_unacked(3);
  l->set_resent(12);
  l->set_route_changes(1);
  l->set_calls_out(600);
  std::string text = Text(SampleStatus(), {}, f);
  for (const char* line :
       {"mcdma_fabric_relay_forwarded_total 1200",
        "mcdma_fabric_relay_forwarded_bytes_total 5242880",
        "mcdma_fabric_routed_delivered_total 300",
        "mcdma_fabric_relay_dropped_total{reason=\"hop_limit\"} 2",
        "mcdma_fabric_relay_dropped_total{reason=\"budget\"} 5",
        "mcdma_fabric_relay_dropped_total{reason=\"refused\"} 0",
        "mcdma_fabric_routed_link_unacked{peer=\"host-e\"} 3",
        "mcdma_fabric_routed_link_resent_total{peer=\"host-e\"} 12",
        "mcdma_fabric_routed_link_route_changes_total{peer=\"host-e\"} 1",
        "mcdma_fabric_routed_link_calls_total{peer=\"host-e\",direction=\"out\"} 600"})
    EXPECT_NE(text.find(line), std::string::npos) << line << " in\n" << text;
  EXPECT_EQ(text.find("# TYPE mcdma_fabric_relay_dropped_total counter"),
            text.rfind("# TYPE mcdma_fabric_relay_dropped_total counter"))
      << "one family, one TYPE line";
}

TEST(MetricFamilies, AStoreDownIsZeroAFileIsUpAndNoFabricExportsNothing) {
  v1::FabricReply f = SampleFabric();
  f.set_store_state("down");
  EXPECT_NE(Text(SampleStatus(), {}, f).find("mcdma_fabric_store_up{source=\"etcd\"} 0"),
            std::string::npos);
  f.set_store_state("connecting");
  EXPECT_NE(Text(SampleStatus(), {}, f).find("mcdma_fabric_store_up{source=\"etcd\"} 0"),
            std::string::npos);
  f.set_source("file");
  f.set_store_state("file");
  EXPECT_NE(Text(SampleStatus(), {}, f).find("mcdma_fabric_store_up{source=\"file\"} 1"),
            std::string::npos);
  v1::FabricReply none;
  none.set_host_id("host-a");
  EXPECT_EQ(Text(SampleStatus(), {}, none).find("mcdma_fabric"), std::string::npos);
}

}  // namespace
}  // namespace mcdma::daemon
