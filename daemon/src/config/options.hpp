// mcdma-rpcd's configuration: one Options struct, loaded from a TOML file
// (--config) and overridden by command-line flags. Every field says its
// default; Validate() names the offending field on error. Each scalar field
// is an option through one row of OptionTable() (option_table.hpp), which
// gives its TOML key, flag, help and bounds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mcdma/status.hpp"

namespace mcdma::daemon {

// One configured peer ([[peer]] in the TOML file, --peer on the command line,
// `mcdmactl link add` at run time).
struct PeerConfig {
  // The peer's host id (its `host_id`); apps name it in "peer/service".
  std::string name;
  // host or host:port of the peer's Peer service; port default 7471.
  std::string address;
  // "auto" (verbs when both ends have a usable device, else tcp), "tcp" or
  // "verbs".
  std::string transport = "auto";
};

inline constexpr uint16_t kDefaultPeerPort = 7471;

// One rail end of this host ([[rail]] in the TOML file, --rail on the
// command line): an interface address that carries tcp data connections of
// links besides the link's own connection (docs/architecture.md §21).
struct RailConfig {
  // Unique among this host's rails; default "tcp:ADDRESS".
  std::string name;
  // "tcp" (the only one a [[rail]] table names; verbs rails come from the
  // RDMA devices).
  std::string transport = "tcp";
  // tcp: an IP literal of a local interface.
  std::string address;
};

// One RDMA device port this host opens ([[rdma]] in the TOML file, --rdma
// on the command line). Each is announced to peers as a verbs rail named
// "verbs:DEVICE:PORT" (docs/architecture.md §21).
struct RdmaConfig {
  std::string device;  // "rxe0", "mlx5_1", "rdma_en2"
  uint32_t port = 1;
  // "linux-rc", "mcdma-cx5", "apple-tb5"; empty: verbs.profile, else the
  // device's own.
  std::string profile;
  // The interface whose RoCE v2 IPv4-mapped GID the port uses; empty: any.
  std::string interface;
  // GID index used when no RoCE v2 IPv4-mapped GID matches; -1: none.
  int32_t gid_index = -1;
};

// The most RDMA device ports one daemon opens.
inline constexpr size_t kMaxRdmaDevices = 8;

// Export and service names that start with `prefix` may be taken only by
// sessions of `uid` ([[reserve]] in the TOML file, --reserve on the command
// line). Unreserved names are first come, first served. The longest
// matching prefix decides (docs/protocol.md, "Names").
struct NameReservation {
  std::string prefix;
  uint32_t uid = 0;
};

struct Options {
  // Control socket; default: platform::DaemonSocketPath() ($MCDMA_SOCKET,
  // $XDG_RUNTIME_DIR/mcdma/rpcd.sock for a user, /run/mcdma/rpcd.sock as root).
  std::string socket;
  // The group that may connect to the control socket. When set, the daemon
  // gives the socket's directory to this group (mode 0750) and the socket
  // mode 0660. Default "": the directory is left as found or made (the
  // systemd service's RuntimeDirectory is group mcdma already). On macOS,
  // where launchd makes no such directory, set it (e.g. "staff", or a group
  // of your own) so that users' apps reach a daemon run as root.
  std::string socket_group;
  // This host's id as peers and status see it; default: the hostname.
  std::string host_id;
  // trace, debug, info, warn, error, critical, off. Default "info".
  std::string log_level = "info";
  // Engine: how long the engine spins (yielding) before it sleeps. 50 us.
  uint32_t spin_budget_us = 50;
  // Engine: after a post on a link or a completion from one, it keeps
  // polling (yielding) this long before it sleeps, so the reply or the next
  // request is picked up without an interrupt and two thread wake-ups. 0:
  // spin_budget_us only. 1000 us.
  uint32_t link_poll_us = 1000;
  // ... and up to twice the average interval between incoming messages,
  // where that average is at most half of this: a ping-pong's next message
  // is picked up by polling whatever the round trip takes. 20000 us.
  uint32_t link_poll_max_us = 20000;
  // 1: poll that way over software RDMA devices too (Soft-RoCE, siw).
  // Their work runs on this host's CPUs, in the kernel, and an engine that
  // polls takes those CPUs from it: on a small host it slows the link down
  // (the RC retry counter ran out under load on 2 vCPUs). 0 (default): over
  // them the engine sleeps until a completion rings it.
  uint32_t poll_software_rdma = 0;
  // Mailbox defaults for sessions that ask for 0; also the maxima.
  uint32_t submission_entries = 1024;
  uint32_t completion_entries = 1024;
  uint32_t inbox_entries = 1024;
  uint64_t arena_bytes = 32ull << 20;  // both halves; 32 MiB
  uint64_t max_arena_bytes = 256ull << 20;
  // Limits.
  uint64_t max_buffer_bytes = 16ull << 30;  // one buffer; 16 GiB
  uint32_t max_buffers_per_session = 1024;
  uint32_t max_sessions = 256;
  uint32_t default_timeout_ms = 30000;  // for submissions with timeout 0
  uint32_t max_ring_faults = 64;        // then the session is closed
  uint32_t max_backlog = 8192;          // undelivered events per session
  // Bytes of undelivered event payloads the daemon holds for one session
  // (64 MiB), and for all sessions together (512 MiB). Beyond them an event
  // for an app that does not read is refused: BUSY, reason BACKLOG_FULL.
  uint64_t max_backlog_bytes = 64ull << 20;
  uint64_t max_backlog_bytes_total = 512ull << 20;
  // Budgets per user (the uid the kernel reports for the control-socket
  // connection): sessions, live buffers, and bytes of shared memory
  // (mailboxes and buffers). 0 for bytes: three quarters of the
  // shared-memory filesystem's size at start-up. Beyond one: NO_MEMORY or
  // BUSY with reason USER_QUOTA.
  uint32_t per_user_sessions = 64;
  uint32_t per_user_buffers = 16384;
  uint64_t per_user_bytes = 0;
  // Open files: the budget (0: RLIMIT_NOFILE, its soft limit raised to the
  // hard one at start-up), and the connections the control socket and the
  // peer port may hold (0: derived from the budget; see Budgets). Start-up
  // fails if what is configured does not fit the budget.
  uint64_t max_open_files = 0;
  uint32_t max_connections = 0;
  uint32_t max_connections_per_user = 0;
  uint64_t transfer_chunk_bytes = 1ull << 20;  // one posted transfer piece; 1 MiB
  uint32_t drain_timeout_ms = 5000;            // SIGTERM: wait this long for in-flight work
  uint32_t attach_timeout_ms = 10000;          // unlink segments not mapped by then

  // Prometheus metrics over HTTP (GET /metrics), host:port; empty: off.
  std::string metrics_listen;

  // ---- Peers (links to other hosts) ----
  // Fabric key file (64 hex digits, mode 0600); empty: no peer plane.
  std::string fabric_key;
  // Peer gRPC service address, host:port. Default "0.0.0.0:7471".
  std::string listen = "0.0.0.0:7471";
  // TCP data-link listener, host:port; default: listen's host, port 0 (any
  // free port, told to peers in Connect).
  std::string data_listen;
  // Optional TLS on the peer service: PEM files. cert + key enable it; ca
  // verifies peers' certificates (required when TLS is on).
  std::string tls_cert;
  std::string tls_key;
  std::string tls_ca;
  uint32_t heartbeat_ms = 500;           // heartbeat interval per link
  uint32_t link_timeout_ms = 3000;       // silence that takes a link down
  uint32_t reconnect_min_ms = 100;       // first reconnect delay, doubling
  uint32_t reconnect_max_ms = 5000;      // longest reconnect delay
  uint32_t link_recv_slots = 64;         // receive slots per link
  uint32_t link_slot_bytes = 256 << 10;  // bytes per receive slot (message fragment)
  // Rails (docs/architecture.md §21): this host's rail ends; transfers of
  // at least stripe_min_bytes are cut into slices of slice_bytes sprayed
  // over the live rails; a rail measured slower than rail_min_share
  // percent of the fastest is left out of striping; a failed rail is held
  // down rail_hold_down_ms before it is probed again; a probe (the rail's
  // connection) gets rail_probe_ms.
  std::vector<RailConfig> rails;
  uint64_t stripe_min_bytes = 1ull << 20;
  uint64_t slice_bytes = 256ull << 10;
  uint32_t rail_min_share = 10;
  uint32_t rail_hold_down_ms = 1000;
  uint32_t rail_probe_ms = 2000;
  // Peer port: connections at once (0: derived from max_open_files), and
  // from one address; how long each stage of an Authenticate exchange may
  // take; unauthenticated Authenticate streams at once from one address.
  uint32_t peer_max_connections = 0;
  uint32_t peer_max_connections_per_address = 16;
  uint32_t auth_timeout_ms = 5000;
  uint32_t auth_per_address = 4;
  std::vector<PeerConfig> peers;

  // ---- Fabric membership (docs/architecture.md §22) ----
  // The membership store, "etcd://host:port[,host:port...]"; empty: none.
  std::string fabric_store;
  // A static fabric file (the same on every host: hosts, addresses,
  // cables); empty: none. At most one of store and file.
  std::string fabric_file;
  // The fabric's name: its keys in the store live under
  // /mcdma/fabrics/NAME/.
  std::string fabric_name = "default";
  // The lease this host's record lives under in the store; kept alive
  // every third of it. A host killed is evicted at most this long after.
  uint32_t fabric_lease_ttl_ms = 6000;
  // Interfaces whose IPv4 addresses this host publishes as its fabric
  // addresses and treats as cables (shell patterns, comma-separated);
  // empty: every interface that is up, but loopback.
  std::string fabric_interfaces;
  // The transport of the links the fabric makes ("auto", "tcp", "verbs").
  std::string fabric_transport = "auto";
  // Names reserved for one user's sessions.
  std::vector<NameReservation> reservations;

  // ---- RDMA (the verbs transport) ----
  // Device to use ("rxe0", "mlx5_0"); empty: the first with an ACTIVE port.
  std::string verbs_device;
  uint32_t verbs_port = 1;
  // Interface peers are reached on; the GID is the RoCE v2 IPv4-mapped one
  // on it. Empty: any interface.
  std::string verbs_interface;
  // GID index used when no RoCE v2 IPv4-mapped GID matches; -1: none.
  int32_t verbs_gid_index = -1;
  // Device profile ("linux-rc", "mcdma-cx5", "apple-tb5"); empty: detected.
  // A stricter profile than the device's is honoured (architecture.md §17).
  std::string verbs_profile;
  // The device ports to open, each a verbs rail. Empty: verbs.device (with
  // verbs.port, verbs.interface, verbs.gid_index) when set, else every
  // device port that is ACTIVE at start (each with verbs.profile and
  // verbs.gid_index).
  std::vector<RdmaConfig> rdma;
};

// Parses a --rdma value: device=NAME[,port=N][,profile=P][,interface=IF]
// [,gid-index=N].
Result<RdmaConfig> ParseRdmaFlag(const std::string& text);

// Parses "host[:port]" ("[v6]:port" for IPv6); port default `default_port`.
Result<std::pair<std::string, uint16_t>> SplitHostPort(const std::string& text,
                                                       uint16_t default_port);
// Checks one peer entry (name is a valid host id, address parses, transport
// known). `where` prefixes errors (e.g. "peer[2]").
Status ValidatePeer(const PeerConfig& peer, const std::string& where);

// The uid a name is reserved for (the longest matching prefix), if any.
std::optional<uint32_t> ReservedFor(const std::vector<NameReservation>& reservations,
                                    const std::string& name);
// Parses --reserve's PREFIX=UID.
Result<NameReservation> ParseReservation(const std::string& text);

// Loads a TOML file over `options`: the keys of OptionTable() and [[peer]]
// tables (documented in systemd/rpcd.toml.example). Unknown keys and values
// of the wrong type are errors, so typos are caught; bounds are Validate()'s.
Status LoadTomlFile(const std::string& path, Options& options);
// Checks each option's bounds (the table's), the relations between options
// and the peers; fills host_id and socket defaults.
Status Validate(Options& options);

}  // namespace mcdma::daemon
