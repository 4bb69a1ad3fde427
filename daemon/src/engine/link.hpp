// The engine's side of a data link to a peer daemon: one transport
// Connection, its receive and send slots, the message being reassembled, and
// counters. The link manager (peer/link_manager.hpp) sets links up and takes
// them down; the engine owns them in between and is the only thread that
// touches them.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <deque>
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

// The transports the engine holds a device for. The loop device carries
// transfers between sessions of this host; tcp and verbs carry links.
enum class Transport : uint8_t { kLoop = 0, kTcp = 1, kVerbs = 2 };
inline constexpr size_t kTransportCount = 3;
// "loop", "tcp", "verbs": the spellings of the config, the peer protocol
// and mcdmactl.
std::string_view TransportName(Transport t);
std::optional<Transport> TransportFromName(std::string_view name);

// Which end dialed a link: this host ("out") or the peer ("in").
enum class LinkOrigin : uint8_t { kOut, kIn };
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
};

// The RDMA device this host's verbs links use, or why there is none.
struct LocalVerbsInfo {
  bool available = false;
  std::string reason;  // when not available
  std::string device;
  uint32_t port = 0;
  uint32_t gid_index = 0;
  std::string gid;
  std::string profile;           // in force
  std::string detected_profile;  // what the device is
  uint32_t active_mtu = 0;
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
};

struct FreeDeleter {
  void operator()(std::byte* p) const { std::free(p); }
};

struct EngineLink {
  uint64_t id = 0;
  LinkSpec spec;
  std::unique_ptr<driver::Connection> conn;
  driver::Device* device = nullptr;  // the link device the connection belongs to
  LinkStats* stats = nullptr;        // owned by the LinkTable, outlives the link

  // Receive slots [0, slots) then send slots [slots, 2 * slots), each
  // slot_bytes, in one page-aligned allocation registered as `region`.
  uint32_t slots = 0;
  uint32_t slot_bytes = 0;      // our slots
  uint32_t fragment_bytes = 0;  // largest SEND: min(ours, the peer's slots)
  std::unique_ptr<std::byte, FreeDeleter> memory;
  std::unique_ptr<driver::MemoryRegion> region;  // declared after memory
  std::vector<uint32_t> free_send;               // free send slot indexes

  // Messages not yet fully posted, in order; the front may be partly posted.
  struct Outgoing {
    link_wire::Header header;
    std::string payload;
    uint32_t sent = 0;
    bool started = false;
  };
  std::deque<Outgoing> backlog;
  uint64_t backlog_bytes = 0;

  // The message being received in fragments.
  Reassembler incoming;

  uint32_t transfers = 0;  // one-sided requests posted and not completed
  // Set by the data path on a transport error or a protocol violation; the
  // engine then drops the link at the end of its pass.
  bool failed = false;
  Code fail_code = Code::kLinkDown;
  std::string fail_reason;

  bool verbs() const { return spec.transport == Transport::kVerbs; }
  std::byte* slot(uint32_t index) const { return memory.get() + uint64_t{index} * slot_bytes; }
  uint32_t payload_per_fragment() const {
    return fragment_bytes - static_cast<uint32_t>(link_wire::kHeaderBytes);
  }
};

// What a link's failure says, from the transport's completion code and
// detail: the code is named only when it is not LINK_DOWN itself (the
// operations end LINK_DOWN, and a message must not repeat it).
std::string LinkFailureText(Code code, const std::string& detail);

}  // namespace mcdma::daemon
