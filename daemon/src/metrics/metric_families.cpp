#include "metrics/metric_families.hpp"

#include <array>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>

namespace mcdma::daemon {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;
using Labels = std::vector<ClientMetric::Label>;

// The link states LinkInfo.state takes; mcdma_link_state has one series
// per state, 1 for the current one.
constexpr std::array<const char*, 5> kLinkStates = {"connecting", "up", "down", "reconnecting",
                                                    "refused"};

class Families {
 public:
  MetricFamily& Add(std::string name, std::string help, MetricType type) {
    out_.push_back(MetricFamily{std::move(name), std::move(help), type, {}});
    return out_.back();
  }
  void Counter(const std::string& name, const std::string& help, double value, Labels labels = {}) {
    Row(Find(name, help, MetricType::Counter), std::move(labels)).counter.value = value;
  }
  void Gauge(const std::string& name, const std::string& help, double value, Labels labels = {}) {
    Row(Find(name, help, MetricType::Gauge), std::move(labels)).gauge.value = value;
  }
  MetricFamily& Find(const std::string& name, const std::string& help, MetricType type) {
    for (MetricFamily& f : out_)
      if (f.name == name) return f;
    return Add(name, help, type);
  }
  static ClientMetric& Row(MetricFamily& f, Labels labels) {
    f.metric.emplace_back();
    f.metric.back().label = std::move(labels);
    return f.metric.back();
  }
  std::vector<MetricFamily> Take() { return std::move(out_); }

 private:
  std::vector<MetricFamily> out_;
};

void AddOperations(Families& f, const v1::StatusReply& s) {
  for (const v1::OpCounters& op : s.ops()) {
    Labels by_op{{"op", op.op()}};
    f.Counter("mcdma_operations_submitted_total",
              "Descriptors apps submitted, by operation (an unknown opcode counts as nop).",
              static_cast<double>(op.submitted()), by_op);
    for (const v1::CodeCount& c : op.by_code()) {
      f.Counter("mcdma_operations_total", "Operations completed, by operation and result code.",
                static_cast<double>(c.count()), {{"op", op.op()}, {"code", c.code()}});
    }
    f.Counter("mcdma_operation_bytes_total", "Payload bytes moved by successful operations.",
              static_cast<double>(op.bytes()), by_op);
    const v1::LatencyHistogram& lat = op.latency();
    MetricFamily& h = f.Find("mcdma_operation_duration_seconds",
                             "Time from the daemon taking a descriptor to posting its completion.",
                             MetricType::Histogram);
    ClientMetric& row = Families::Row(h, by_op);
    uint64_t cumulative = 0;
    for (int i = 0; i < lat.counts_size(); ++i) {
      cumulative += lat.counts(i);
      double bound =
          i < lat.bounds_s_size() ? lat.bounds_s(i) : std::numeric_limits<double>::infinity();
      row.histogram.bucket.push_back({cumulative, bound});
    }
    row.histogram.sample_count = lat.count();
    row.histogram.sample_sum = lat.sum_s();
  }
}

void AddState(Families& f, const v1::StatusReply& s) {
  f.Gauge("mcdma_info", "Always 1; the daemon's version and host id are its labels.", 1,
          {{"version", s.version()}, {"host_id", s.host_id()}});
  f.Gauge("mcdma_uptime_seconds", "Seconds since the daemon started.", s.uptime_s());
  f.Gauge("mcdma_draining", "1 while the daemon drains before it stops.",
          s.state() == "draining" ? 1 : 0);
  f.Gauge("mcdma_sessions", "App sessions open.", s.sessions());
  f.Gauge("mcdma_buffers", "Buffers the apps hold.", s.buffers());
  f.Gauge("mcdma_buffer_bytes", "Bytes of the buffers the apps hold.",
          static_cast<double>(s.buffer_bytes()));
  f.Gauge("mcdma_exports", "Exports published.", s.exports());
  f.Gauge("mcdma_services", "Services served.", s.services());
  f.Gauge("mcdma_inflight_operations", "Calls and transfers in flight.", s.inflight());
  f.Counter("mcdma_invalid_descriptors_total", "Malformed descriptors refused, since start.",
            static_cast<double>(s.invalid_descriptors()));
  f.Counter("mcdma_ring_faults_total", "Corrupted mailbox ring indices seen, since start.",
            static_cast<double>(s.ring_faults()));
  f.Counter("mcdma_sessions_reaped_total", "Sessions closed because their app went away.",
            static_cast<double>(s.sessions_reaped()));
  f.Counter("mcdma_segment_unlink_failures_total",
            "Shared-memory segments the daemon could not remove.",
            static_cast<double>(s.segment_unlink_failures()));
}

void AddBudgets(Families& f, const v1::Budgets& b) {
  f.Gauge("mcdma_open_files", "Descriptors the daemon has open (-1: unknown).",
          static_cast<double>(b.open_files()));
  f.Gauge("mcdma_open_files_limit", "The open-files budget.",
          static_cast<double>(b.max_open_files()));
  for (const v1::ListenerInfo& l : b.listeners()) {
    Labels by{{"listener", l.name()}};
    f.Gauge("mcdma_listener_connections", "Connections open on a listener.", l.open(), by);
    f.Gauge("mcdma_listener_connections_limit", "The cap on a listener's open connections.",
            l.max_connections(), by);
    f.Counter("mcdma_listener_accepted_total", "Connections a listener accepted.",
              static_cast<double>(l.accepted()), by);
    for (const auto& [why, n] : std::initializer_list<std::pair<const char*, uint64_t>>{
             {"limit", l.refused_limit()},
             {"per_source", l.refused_per_source()},
             {"out_of_files", l.shed_out_of_files()},
             {"accept_error", l.accept_errors()}}) {
      f.Counter("mcdma_listener_refused_total", "Connections a listener closed at once, by why.",
                static_cast<double>(n), {{"listener", l.name()}, {"reason", why}});
    }
  }
  f.Gauge("mcdma_backlog_bytes", "Undelivered event payloads held for apps.",
          static_cast<double>(b.backlog_bytes()));
  f.Gauge("mcdma_backlog_bytes_limit", "The budget of undelivered event payloads, in all.",
          static_cast<double>(b.max_backlog_bytes_total()));
  f.Gauge("mcdma_sessions_limit", "The daemon-wide session limit.", b.max_sessions());
  for (const v1::UserUsage& u : b.users()) {
    Labels by{{"uid", std::to_string(u.uid())}};
    f.Gauge("mcdma_user_sessions", "Sessions a user holds.", u.sessions(), by);
    f.Gauge("mcdma_user_buffers", "Buffers a user holds.", u.buffers(), by);
    f.Gauge("mcdma_user_shm_bytes", "Shared memory a user holds (mailboxes and buffers).",
            static_cast<double>(u.bytes()), by);
  }
  f.Gauge("mcdma_user_sessions_limit", "The per-user session budget.", b.per_user_sessions());
  f.Gauge("mcdma_user_buffers_limit", "The per-user buffer budget.", b.per_user_buffers());
  f.Gauge("mcdma_user_shm_bytes_limit", "The per-user shared-memory budget.",
          static_cast<double>(b.per_user_bytes()));
  f.Gauge("mcdma_shm_capacity_bytes", "Size of the shared-memory filesystem (0: unknown).",
          static_cast<double>(b.shm_capacity()));
  f.Gauge("mcdma_shm_free_bytes", "Free bytes of the shared-memory filesystem (0: unknown).",
          static_cast<double>(b.shm_free()));
  f.Gauge("mcdma_peer_auth_in_progress", "Peer authentications under way.", b.auth_in_progress());
  f.Counter("mcdma_peer_auth_refused_total", "Peer authentications refused for a limit.",
            static_cast<double>(b.auth_refused()));
  f.Counter("mcdma_peer_auth_timed_out_total", "Peer authentications ended by their deadline.",
            static_cast<double>(b.auth_timed_out()));
}

// One series per rail of a link (docs/architecture.md §21), labelled by the
// peer, which end dialed, and the rail's index and name.
void AddRails(Families& f, const v1::LinkInfo& l) {
  for (const v1::RailInfo& r : l.rails()) {
    Labels by{{"peer", l.peer()},
              {"origin", l.origin()},
              {"rail", std::to_string(r.index())},
              {"name", r.name()}};
    f.Gauge("mcdma_link_rail_up", "1 while a rail of a link is up.", r.state() == "up" ? 1 : 0, by);
    f.Gauge("mcdma_link_rail_last_resort",
            "1 for rail 0 while other rails are up (it then carries nothing).",
            r.last_resort() ? 1 : 0, by);
    f.Counter("mcdma_link_rail_sent_bytes_total",
              "Message and one-sided bytes posted on a rail (this rail connection's life).",
              static_cast<double>(r.bytes_sent()), by);
    f.Counter("mcdma_link_rail_slices_total", "One-sided slices completed on a rail.",
              static_cast<double>(r.slices()), by);
    f.Counter("mcdma_link_rail_slices_reissued_total",
              "Slices of a rail reissued on other rails after it failed.",
              static_cast<double>(r.slices_reissued()), by);
    f.Counter("mcdma_link_rail_downs_total", "Times a rail went down.",
              static_cast<double>(r.downs()), by);
    f.Gauge("mcdma_link_rail_inflight_bytes", "One-sided bytes posted on a rail and not completed.",
            static_cast<double>(r.inflight_bytes()), by);
    f.Gauge("mcdma_link_rail_throughput_bytes_per_second",
            "Measured one-sided throughput of a rail while busy (0 until measured).",
            r.throughput_mbps() * 1e6, by);
  }
}

// One series per RDMA device port the daemon opened (each a verbs rail of
// every link): whether its port is ACTIVE, and its budgets in use.
void AddRdmaPorts(Families& f, const v1::LinksReply& links) {
  for (const v1::LocalVerbs& v : links.devices()) {
    Labels by{{"device", v.device()}, {"port", std::to_string(v.port())}, {"profile", v.profile()}};
    f.Gauge("mcdma_rdma_port_active", "1 while an RDMA device port is ACTIVE.",
            v.state() == "ACTIVE" ? 1 : 0, by);
    f.Gauge("mcdma_rdma_port_queue_pairs", "Queue pairs in use on an RDMA device port.",
            v.queue_pairs(), by);
    f.Gauge("mcdma_rdma_port_queue_pairs_max",
            "The most queue pairs the port's profile allows (0: the device's limit).",
            v.max_queue_pairs(), by);
    f.Gauge("mcdma_rdma_port_registrations", "Memory registrations in use on an RDMA device.",
            v.registrations(), by);
    f.Gauge("mcdma_rdma_port_registrations_max",
            "The most registrations the port's profile allows (0: the device's limit).",
            v.max_registrations(), by);
  }
}

void AddLinks(Families& f, const v1::LinksReply& links) {
  AddRdmaPorts(f, links);
  for (const v1::LinkInfo& l : links.links()) {
    Labels by{{"peer", l.peer()}};
    for (const char* state : kLinkStates) {
      f.Gauge("mcdma_link_state", "1 for the state a link to a peer is in, 0 for the others.",
              l.state() == state ? 1 : 0, {{"peer", l.peer()}, {"state", state}});
    }
    f.Gauge(
        "mcdma_link_info", "Always 1; the transport a link uses (\"\" until up).", 1,
        {{"peer", l.peer()}, {"transport", l.transport()}, {"requested", l.transport_requested()}});
    f.Gauge("mcdma_link_rtt_seconds", "Heartbeat round trip, smoothed (0 until known).",
            l.rtt_avg_us() / 1e6, by);
    f.Gauge("mcdma_link_generation", "Generation of the current (or last) data link.",
            static_cast<double>(l.generation()), by);
    f.Gauge("mcdma_link_inflight_operations", "Operations in flight on a link.", l.inflight(), by);
    const v1::LinkCounters& c = l.counters();
    f.Counter("mcdma_link_reconnects_total", "Times a link came back after going down.",
              static_cast<double>(c.reconnects()), by);
    f.Counter("mcdma_link_downs_total", "Times a link went down.", static_cast<double>(c.downs()),
              by);
    f.Counter("mcdma_link_sent_bytes_total", "Payload bytes sent over a link.",
              static_cast<double>(c.bytes_sent()), by);
    f.Counter("mcdma_link_received_bytes_total", "Payload bytes received over a link.",
              static_cast<double>(c.bytes_received()), by);
    f.Counter("mcdma_link_operations_failed_total", "Operations over a link that failed.",
              static_cast<double>(c.ops_failed()), by);
    f.Counter("mcdma_link_heartbeats_missed_total", "Heartbeats that failed or went unanswered.",
              static_cast<double>(c.heartbeats_missed()), by);
    AddRails(f, l);
  }
}

// The fabric's membership (docs/architecture.md §22): whether its store
// answers, its members by state, and how far the store's history was
// followed. Nothing without a fabric.
void AddFabric(Families& f, const v1::FabricReply& fabric) {
  if (fabric.source().empty()) return;
  const std::string& store = fabric.store_state();
  f.Gauge("mcdma_fabric_store_up",
          "1 while the fabric's store is reachable (always for a fabric file), by source.",
          store == "connected" || store == "file" ? 1 : 0, {{"source", fabric.source()}});
  uint32_t members = 0;
  uint32_t evicted = 0;
  uint32_t direct = 0;
  for (const v1::FabricHostView& h : fabric.hosts()) {
    if (h.state() == "member") ++members;
    if (h.state() == "evicted") ++evicted;
    if (h.state() == "member" && h.reach() == "direct") ++direct;
  }
  const char* help = "Hosts of the fabric other than this one, by state (member, evicted).";
  f.Gauge("mcdma_fabric_members", help, members, {{"state", "member"}});
  f.Gauge("mcdma_fabric_members", help, evicted, {{"state", "evicted"}});
  f.Gauge("mcdma_fabric_members_direct",
          "Members this host reaches directly (on a subnet or cable of its own).", direct);
  f.Counter("mcdma_fabric_relists_total",
            "Times the members were listed from the store (at start, after a watch error or a "
            "reconnect).",
            static_cast<double>(fabric.relists()));
  f.Gauge("mcdma_fabric_revision", "The store revision last seen (0 for a fabric file).",
          static_cast<double>(fabric.revision()));
  // Relays and routes (docs/architecture.md §23).
  const v1::FabricRelay& r = fabric.relay();
  f.Counter("mcdma_fabric_relay_forwarded_total",
            "Routed messages this daemon forwarded for other hosts.",
            static_cast<double>(r.forwarded()));
  f.Counter("mcdma_fabric_relay_forwarded_bytes_total",
            "Bytes of the routed messages this daemon forwarded for other hosts.",
            static_cast<double>(r.forwarded_bytes()));
  f.Counter("mcdma_fabric_routed_delivered_total", "Routed messages that ended at this daemon.",
            static_cast<double>(r.delivered()));
  const char* dropped = "Routed messages this daemon dropped, by reason.";
  for (const auto& [reason, n] :
       {std::pair<const char*, uint64_t>{"hop_limit", r.dropped_hop_limit()},
        {"no_route", r.dropped_no_route()},
        {"budget", r.dropped_full()},
        {"stale", r.dropped_stale()},
        {"refused", r.dropped_refused()},
        {"loop", r.dropped_looped()}})
    f.Counter("mcdma_fabric_relay_dropped_total", dropped, static_cast<double>(n),
              {{"reason", reason}});
  for (const v1::FabricRoutedLink& l : r.routed()) {
    f.Gauge("mcdma_fabric_routed_link_unacked",
            "Messages of a routed link not yet acknowledged by its far end, by peer.",
            static_cast<double>(l.unacked()), {{"peer", l.peer()}});
    f.Counter("mcdma_fabric_routed_link_resent_total",
              "Messages of a routed link sent again (route changes, no ack), by peer.",
              static_cast<double>(l.resent()), {{"peer", l.peer()}});
    f.Counter("mcdma_fabric_routed_link_route_changes_total",
              "Times a routed link's next hop changed, by peer.",
              static_cast<double>(l.route_changes()), {{"peer", l.peer()}});
    f.Counter("mcdma_fabric_routed_link_calls_total",
              "Calls over a routed link, by peer and direction (out: made here).",
              static_cast<double>(l.calls_out()), {{"peer", l.peer()}, {"direction", "out"}});
    f.Counter("mcdma_fabric_routed_link_calls_total",
              "Calls over a routed link, by peer and direction (out: made here).",
              static_cast<double>(l.calls_in()), {{"peer", l.peer()}, {"direction", "in"}});
  }
}

}  // namespace

std::vector<MetricFamily> MetricFamilies(const v1::StatusReply& status, const v1::LinksReply& links,
                                         const v1::FabricReply& fabric) {
  Families f;
  AddState(f, status);
  AddOperations(f, status);
  AddBudgets(f, status.budgets());
  AddLinks(f, links);
  AddFabric(f, fabric);
  return f.Take();
}

}  // namespace mcdma::daemon
