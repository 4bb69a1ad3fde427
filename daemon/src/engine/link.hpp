// The engine's side of a data link to a peer daemon: one transport
// Connection, its receive and send slots, the message being reassembled, and
// counters. The link manager (peer/link_manager.hpp) sets links up and takes
// them down; the engine owns them in between and is the only thread that
// touches them.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "driver/transport.hpp"
#include "engine/link_wire.hpp"
#include "engine/reassembler.hpp"
#include "mcdma/status.hpp"

namespace mcdma::daemon {

using Clock = std::chrono::steady_clock;

// The transports the engine holds a device for. The loop device carries
// transfers between sessions of this host; tcp and verbs carry links.
enum class Transport : uint8_t { kLoop = 0, kTcp = 1, kVerbs = 2 };
inline constexpr size_t kTransportCount = 3;
// "loop", "tcp", "verbs": the spellings of the config, the peer protocol
// and mcdmactl.
std::string_view TransportName(Transport t);
std::optional<Transport> TransportFromName(std::string_view name);

// Registration slots: every device a buffer or an export may be registered
// with has one. The loop and tcp devices, then each RDMA device port this
// daemon opened (at most kMaxRdmaPorts), in the order they were opened.
inline constexpr size_t kMaxRdmaPorts = 8;
inline constexpr size_t kDeviceSlots = 2 + kMaxRdmaPorts;
inline constexpr uint8_t kLoopSlot = 0;
inline constexpr uint8_t kTcpSlot = 1;
inline constexpr uint8_t kFirstRdmaSlot = 2;  // the first RDMA device: verbs links start on it
// The slot of a transport's (first) device.
constexpr uint8_t SlotOf(Transport t) {
  return t == Transport::kLoop ? kLoopSlot : t == Transport::kTcp ? kTcpSlot : kFirstRdmaSlot;
}
// The name grants key a device's registrations by: "tcp", or the RDMA
// device's own name.
inline constexpr std::string_view kTcpKeys = "tcp";

// Which end dialed a link: this host ("out") or the peer ("in"); or no
// link of its own: "routed" over other daemons (engine_routes.cpp).
enum class LinkOrigin : uint8_t { kOut, kIn, kRouted };
std::string_view OriginName(LinkOrigin o);

// A (peer, origin) pair: links of all its generations share its counters.
struct LinkKey {
  std::string peer;
  LinkOrigin origin = LinkOrigin::kOut;
  bool operator<(const LinkKey& o) const {
    return std::tie(peer, origin) < std::tie(o.peer, o.origin);
  }
};

// Cumulative traffic of a (peer, origin) pair over all its generations.
struct LinkStats {
  uint64_t messages_sent = 0;
  uint64_t messages_received = 0;
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  uint64_t calls_out = 0;
  uint64_t calls_in = 0;
  uint64_t reads = 0;
  uint64_t writes = 0;
  uint64_t read_bytes = 0;
  uint64_t write_bytes = 0;
  uint64_t ops_failed = 0;
};

// What the link manager hands the engine with a connected Connection.
struct LinkSpec {
  std::string peer;  // the peer's host id
  LinkOrigin origin = LinkOrigin::kOut;
  uint64_t generation = 0;
  std::string peer_instance;              // the peer daemon's instance id
  uint32_t peer_slot_bytes = 0;           // the peer's receive slot size (0: same as ours)
  Transport transport = Transport::kTcp;  // which link device it runs on: tcp or verbs
  // The peer's device rail 0 reaches: "tcp", or its RDMA device's name
  // (the key of its grants' pieces for that device).
  std::string peer_device = std::string(kTcpKeys);
};

// An RDMA device port this daemon opened (or, with `available` false, why
// there is none).
struct LocalVerbsInfo {
  bool available = false;
  std::string reason;  // when not available
  std::string device;
  std::string rail;  // its rail name, "verbs:DEVICE:PORT"
  uint8_t slot = kFirstRdmaSlot;
  uint32_t port = 0;
  uint32_t gid_index = 0;
  std::string gid;
  std::string profile;           // in force
  std::string detected_profile;  // what the device is
  uint32_t active_mtu = 0;
};

// Counters of one rail, kept while the link lives.
struct RailStats {
  uint64_t bytes_sent = 0;       // message fragments and one-sided bytes posted
  uint64_t bytes_received = 0;   // message fragments received
  uint64_t slices = 0;           // one-sided slices completed
  uint64_t slices_reissued = 0;  // slices posted here, reissued on other rails after a failure
  uint64_t downs = 0;
};

// A rail as status displays show it.
struct RailSnapshot {
  uint32_t index = 0;
  std::string local;
  std::string remote;
  Transport transport = Transport::kTcp;
  std::string profile;
  bool up = false;
  bool last_resort = false;
  bool messages = false;
  bool probing = false;  // connected, its probe not answered yet
  double probe_rtt_us = 0;
  uint64_t up_for_ms = 0;  // since its probe was answered; 0 while not up
  std::string device;
  uint32_t port = 0;
  std::string peer_device;
  uint64_t inflight_bytes = 0;
  double rate_bps = 0;
  double share = 0;
  std::string last_error;
  RailStats stats;
};

// A snapshot for status displays.
struct LinkSnapshot {
  uint64_t id = 0;
  std::string peer;
  LinkOrigin origin = LinkOrigin::kOut;
  Transport transport = Transport::kTcp;
  uint64_t generation = 0;
  uint32_t inflight = 0;
  LinkStats stats;
  std::vector<RailSnapshot> rails;
  uint64_t duplicates = 0;  // messages received twice and dropped
  uint64_t resent = 0;      // messages sent again after a rail failed
};

struct FreeDeleter {
  void operator()(std::byte* p) const { std::free(p); }
};

// What the link manager hands the engine for a rail beyond rail 0.
struct RailSpec {
  uint32_t index = 0;  // the canonical index both ends computed (>= 1)
  std::string local;   // this host's rail name ("tcp:10.1.1.1", "verbs:rxe1:1")
  std::string remote;  // the peer's
  Transport transport = Transport::kTcp;
  std::string profile;
  uint32_t peer_slot_bytes = 0;
  // verbs: this host's device and port, and the peer's device (the name
  // its grants key registrations by; "tcp" for a tcp rail).
  uint8_t slot = kTcpSlot;
  std::string device;
  uint32_t port = 0;
  std::string peer_device = std::string(kTcpKeys);
};

// One connection of a link (docs/architecture.md §21). Rail 0 is the
// connection the link was set up with; while another rail is up it carries
// nothing (the rail of last resort).
struct Rail {
  RailSpec spec;
  std::unique_ptr<driver::Connection> conn;  // null while the rail is down
  driver::Device* device = nullptr;

  // Receive slots [0, slots) then send slots [slots, 2 * slots), each
  // slot_bytes, in one page-aligned allocation registered as `region`.
  uint32_t slots = 0;
  uint32_t slot_bytes = 0;      // our slots
  uint32_t fragment_bytes = 0;  // largest SEND: min(ours, the peer's slots)
  std::unique_ptr<std::byte, FreeDeleter> memory;
  std::unique_ptr<driver::MemoryRegion> region;  // declared after memory
  std::vector<uint32_t> free_send;               // free send slot indexes

  // The message being received in fragments on this rail.
  Reassembler incoming;

  uint32_t transfers = 0;       // one-sided requests posted and not completed
  uint64_t inflight_bytes = 0;  // their bytes
  // Throughput while busy: bytes completed over windows of at least 20 ms
  // that start when the rail gets work, smoothed; 0 until the first.
  double rate_bps = 0;
  Clock::time_point rate_at{};  // when rate_bps last took a sample
  Clock::time_point window_start{};
  uint64_t window_bytes = 0;
  uint64_t striped_bytes = 0;  // slices posted here, for the share
  // The last completion, or the first post after the rail was idle: a rail
  // with work posted and nothing completed for long has stalled.
  Clock::time_point last_progress = Clock::now();
  bool carried_messages = false;  // since the link's last resend
  RailStats stats;

  // Set on a transport error or when the link manager takes the rail out;
  // the engine then drops the rail (or, for the last one, the link).
  bool failed = false;
  Code fail_code = Code::kLinkDown;
  std::string fail_reason;
  std::string last_error;  // why it last went down

  // A rail beyond rail 0 carries traffic only once a probe went over it
  // and its answer came back (the pair really reaches); until then it is
  // live (polled) but not up. The probe fails the rail at its deadline.
  bool probed = true;
  Clock::time_point up_since = Clock::now();  // when its probe was answered (rail 0: added)
  Clock::time_point probe_sent{};
  Clock::time_point probe_deadline{};
  double probe_rtt_us = 0;     // the probe's round trip: which rail carries messages
  bool owe_probe_ack = false;  // the peer's probe, answered when no message is half-sent here

  bool live() const { return conn != nullptr && !failed; }
  bool up() const { return live() && probed; }
  // Marks the rail failed (the first reason stays); the engine drops it,
  // or the link with its last rail, at the end of its pass.
  void Fail(Code code, const std::string& why) {
    if (failed) return;
    failed = true;
    fail_code = code;
    fail_reason = why;
  }
  std::byte* slot(uint32_t index) const { return memory.get() + uint64_t{index} * slot_bytes; }
  uint32_t payload_per_fragment() const {
    return fragment_bytes - static_cast<uint32_t>(link_wire::kHeaderBytes);
  }
  uint32_t sends_in_flight() const { return slots - static_cast<uint32_t>(free_send.size()); }
};

struct EngineLink {
  uint64_t id = 0;
  LinkSpec spec;
  LinkStats* stats = nullptr;  // owned by the LinkTable, outlives the link

  // rails[0] is the link's own connection; rails[i] has spec.index i.
  std::vector<std::unique_ptr<Rail>> rails;
  // The rail messages are posted on now (-1: none chosen yet). A message
  // once started stays on its rail; the next may go elsewhere.
  int message_rail = -1;

  // Messages not yet fully posted, in order; the front may be partly posted
  // (on `message_rail`). A message keeps its sequence number when it is
  // sent again.
  struct Outgoing {
    link_wire::Header header;
    std::string payload;
    uint32_t sent = 0;
    bool started = false;
    // Routed links: when it last went out, and whether it went before.
    Clock::time_point sent_at{};
    bool sent_again = false;
    // A traced call's id (CallTrace::posted_ns is set once it is posted).
    uint64_t trace_call = 0;
  };
  std::deque<Outgoing> backlog;
  uint64_t backlog_bytes = 0;
  // Posted and not yet acknowledged by the peer, in sequence order: sent
  // again on another rail when the rail that carried them fails.
  std::map<uint64_t, Outgoing> unacked;  // by sequence number
  uint64_t unacked_bytes = 0;
  uint64_t acked = 0;     // the peer's latest cumulative ack
  uint64_t next_seq = 1;  // of the next message we send

  // Receiving: every message up to `delivered` was dispatched; later ones
  // that came early (a rail switch) wait in `early`.
  uint64_t delivered = 0;
  uint64_t ack_sent = 0;         // the highest ack we put on a header
  uint64_t bytes_since_ack = 0;  // payload delivered since then
  std::map<uint64_t, std::pair<link_wire::Header, std::string>> early;
  uint64_t early_bytes = 0;
  uint64_t duplicates = 0;  // messages received twice (sent again after a rail failed)
  uint64_t resent = 0;      // messages we sent again

  // Set by the data path on a protocol violation or when the last rail
  // fails; the engine then drops the link at the end of its pass.
  bool failed = false;
  Code fail_code = Code::kLinkDown;
  std::string fail_reason;

  // A routed link (origin kRouted: docs/architecture.md §23) has no rails:
  // each message goes whole, in a kRouted envelope, over the link to
  // `next_hop` (the route's first daemon); every relay forwards it. Its
  // sequence numbers and acks are end to end, so a message lost with a
  // relay is sent again (after a route change, or when nothing was
  // acknowledged for a while) and delivered once.
  bool routed = false;
  std::string next_hop;  // "" while there is no route
  // The peer's routed link whose messages this one receives (its epoch,
  // docs/protocol.md §20); 0 before the first. This link's own epoch is
  // its id.
  uint64_t peer_epoch = 0;
  Clock::time_point no_route_since{};
  // When `acked` last moved, or the oldest unacknowledged message went out.
  Clock::time_point ack_progress{};
  Clock::time_point last_resend{};
  uint64_t route_changes = 0;
  // The round trip of routed messages to their ack, smoothed, and its
  // deviation; resends in a row without an ack (the timeout doubles).
  Clock::duration routed_srtt{};
  Clock::duration routed_rttvar{};
  uint32_t resend_backoff = 0;
  // Bytes of READ/WRITE pieces sent on this routed link and not yet
  // answered (its window for transfers: engine_routed_transfer.cpp).
  uint64_t piece_bytes = 0;

  bool verbs() const { return spec.transport == Transport::kVerbs; }
  // Whether any rail of the link (up or not) runs on an RDMA device: a
  // revoked export's RDMA registrations then wait for the peer's ack.
  bool has_rdma() const {
    for (const auto& r : rails)
      if (r != nullptr && r->spec.transport == Transport::kVerbs) return true;
    return false;
  }
  Rail* rail(uint32_t index) {
    return index < rails.size() && rails[index] != nullptr ? rails[index].get() : nullptr;
  }
  // Whether any rail other than rail 0 is up.
  bool has_other_rail() const {
    for (size_t i = 1; i < rails.size(); ++i)
      if (rails[i] != nullptr && rails[i]->up()) return true;
    return false;
  }
  // Whether a rail other than `r` is up (`r` is not the link's last).
  bool other_than(const Rail& r) const {
    for (const auto& o : rails)
      if (o != nullptr && o.get() != &r && o->up()) return true;
    return false;
  }
};

// wr_id spaces on a rail's connection: transfer ids stay below 2^56.
inline constexpr uint64_t kRailSendTag = 1ULL << 62;
inline constexpr uint64_t kRailRecvTag = 1ULL << 61;
inline constexpr uint64_t kRailSlotMask = (1ULL << 32) - 1;

// Throughput bookkeeping (engine_rails.cpp): work is about to be posted on
// `r`; `bytes` of it completed.
void NoteRailBusy(Rail& r);
void NoteSliceDone(Rail& r, uint64_t bytes);

// What a link's failure says, from the transport's completion code and
// detail: the code is named only when it is not LINK_DOWN itself (the
// operations end LINK_DOWN, and a message must not repeat it).
std::string LinkFailureText(Code code, const std::string& detail);

}  // namespace mcdma::daemon
