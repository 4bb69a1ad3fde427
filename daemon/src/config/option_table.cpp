#include "config/option_table.hpp"

#include <array>
#include <type_traits>

#include "mcdma_internal/mailbox_layout.hpp"

namespace mcdma::daemon {
namespace {

using Kind = OptionBounds::Kind;

constexpr std::string_view kLogLevels[] = {"trace", "debug",    "info", "warn",
                                           "error", "critical", "off"};
constexpr std::string_view kProfiles[] = {"linux-rc", "mcdma-cx5", "apple-tb5"};
constexpr std::string_view kTransports[] = {"auto", "tcp", "verbs"};

constexpr OptionBounds Range(int64_t min, int64_t max) { return {Kind::kRange, min, max}; }
constexpr OptionBounds AtLeast(int64_t min) { return {Kind::kRange, min, kNoMax}; }
constexpr OptionBounds RingEntries() {
  return {Kind::kPowerOfTwo, 8, int64_t{shm::kMaxRingEntries}};
}

// Keys are grouped as the TOML file groups them (systemd/rpcd.toml.example
// documents each at length).
const std::array kTable = {
    OptionSpec{"socket", "--socket", &Options::socket,
               "control socket (default: $MCDMA_SOCKET, $XDG_RUNTIME_DIR/mcdma/rpcd.sock, "
               "/run/mcdma/rpcd.sock; /var/run/mcdma/rpcd.sock on macOS)"},
    OptionSpec{"socket_group", "--socket-group", &Options::socket_group,
               "group that may connect: the socket's directory becomes 0750 of this group "
               "(default: leave it as found)"},
    OptionSpec{"host_id", "--host-id", &Options::host_id,
               "host id shown to peers (default: hostname)"},
    OptionSpec{"log_level",
               "--log-level",
               &Options::log_level,
               "trace|debug|info|warn|error|critical|off",
               {Kind::kOneOf, 0, 0, kLogLevels}},
    OptionSpec{"drain_timeout_ms", "--drain-timeout-ms", &Options::drain_timeout_ms,
               "on SIGTERM, wait this long for in-flight work"},
    OptionSpec{"engine.spin_budget_us", "--spin-budget-us", &Options::spin_budget_us,
               "engine spin before sleeping, microseconds", Range(0, 1'000'000)},
    OptionSpec{
        "engine.link_poll_us", "--link-poll-us", &Options::link_poll_us,
        "after message traffic on an RDMA rail, keep polling (yielding) this long before sleeping, "
        "microseconds",
        Range(0, 1'000'000)},
    OptionSpec{"engine.poll_software_rdma", "--poll-software-rdma", &Options::poll_software_rdma,
               "1: poll links' completions over software RDMA (Soft-RoCE, siw) too; 0: not",
               Range(0, 1)},
    OptionSpec{"engine.link_poll_max_us", "--link-poll-max-us", &Options::link_poll_max_us,
               "poll up to twice the interval between incoming messages where that is at most "
               "half of this, microseconds",
               Range(0, 10'000'000)},
    OptionSpec{"engine.transfer_chunk_bytes", "--transfer-chunk-bytes",
               &Options::transfer_chunk_bytes, "largest piece a bulk transfer is posted in",
               Range(4096, int64_t{1} << 30)},
    OptionSpec{"mailbox.submission_entries", "--submission-entries", &Options::submission_entries,
               "submission ring entries per session (default and most)", RingEntries()},
    OptionSpec{"mailbox.completion_entries", "--completion-entries", &Options::completion_entries,
               "completion ring entries per session (default and most)", RingEntries()},
    OptionSpec{"mailbox.inbox_entries", "--inbox-entries", &Options::inbox_entries,
               "inbox ring entries per session (default and most)", RingEntries()},
    OptionSpec{"mailbox.arena_bytes", "--arena-bytes", &Options::arena_bytes,
               "default mailbox arena size per session (at least 64 KiB, at most max_arena_bytes)"},
    OptionSpec{"mailbox.max_arena_bytes", "--max-arena-bytes", &Options::max_arena_bytes,
               "largest arena a session may ask for", Range(0, int64_t{shm::kMaxArenaBytes})},
    OptionSpec{"mailbox.attach_timeout_ms", "--attach-timeout-ms", &Options::attach_timeout_ms,
               "unlink mailbox and buffer segments the app has not mapped by then"},
    OptionSpec{"limits.max_buffer_bytes", "--max-buffer-bytes", &Options::max_buffer_bytes,
               "largest buffer an app may allocate", AtLeast(1)},
    OptionSpec{"limits.max_buffers_per_session", "--max-buffers-per-session",
               &Options::max_buffers_per_session, "live buffers per session"},
    OptionSpec{"limits.max_sessions", "--max-sessions", &Options::max_sessions,
               "concurrent sessions; beyond it new sessions fail BUSY", AtLeast(1)},
    OptionSpec{"limits.default_timeout_ms", "--default-timeout-ms", &Options::default_timeout_ms,
               "deadline for operations that set none", AtLeast(1)},
    OptionSpec{"limits.max_ring_faults", "--max-ring-faults", &Options::max_ring_faults,
               "ring faults a session may cause before it is closed"},
    OptionSpec{"limits.max_backlog", "--max-backlog", &Options::max_backlog,
               "undelivered events queued per session ring", AtLeast(16)},
    OptionSpec{"limits.max_backlog_bytes", "--max-backlog-bytes", &Options::max_backlog_bytes,
               "bytes of undelivered event payloads held for one session", AtLeast(64 << 10)},
    OptionSpec{"limits.max_backlog_bytes_total", "--max-backlog-bytes-total",
               &Options::max_backlog_bytes_total,
               "bytes of undelivered event payloads held for all sessions", AtLeast(64 << 10)},
    OptionSpec{"limits.per_user_sessions", "--per-user-sessions", &Options::per_user_sessions,
               "sessions one user may hold at once", AtLeast(1)},
    OptionSpec{"limits.per_user_buffers", "--per-user-buffers", &Options::per_user_buffers,
               "live buffers one user may hold at once", AtLeast(1)},
    OptionSpec{"limits.per_user_bytes", "--per-user-bytes", &Options::per_user_bytes,
               "shared memory (mailboxes and buffers) one user may hold; 0: 3/4 of /dev/shm"},
    OptionSpec{"limits.max_open_files", "--max-open-files", &Options::max_open_files,
               "the daemon's budget of open files; 0: RLIMIT_NOFILE (raised to its hard limit)"},
    OptionSpec{"limits.max_connections", "--max-connections", &Options::max_connections,
               "control-socket connections at once; 0: half of what max_open_files leaves"},
    OptionSpec{"limits.max_connections_per_user", "--max-connections-per-user",
               &Options::max_connections_per_user,
               "control-socket connections one user may hold; 0: a quarter of max_connections"},
    OptionSpec{"metrics_listen", "--metrics-listen", &Options::metrics_listen,
               "Prometheus metrics over HTTP (GET /metrics), host:port; default: off"},
    OptionSpec{"fabric_key", "--fabric-key", &Options::fabric_key,
               "fabric key file (mode 0600; `mcdmactl fabric-key new` writes one); "
               "enables the peer service"},
    OptionSpec{"listen", "--listen", &Options::listen, "peer service address, host:port"},
    OptionSpec{"data_listen", "--data-listen", &Options::data_listen,
               "tcp data-link listener, host:port (default: listen's host, any port)"},
    OptionSpec{"link.heartbeat_ms", "--heartbeat-ms", &Options::heartbeat_ms,
               "link heartbeat interval", Range(10, 60'000)},
    OptionSpec{"link.timeout_ms", "--link-timeout-ms", &Options::link_timeout_ms,
               "heartbeat silence that takes a link down (at least twice heartbeat_ms)"},
    OptionSpec{"link.reconnect_min_ms", "--reconnect-min-ms", &Options::reconnect_min_ms,
               "first reconnect backoff, doubling"},
    OptionSpec{"link.reconnect_max_ms", "--reconnect-max-ms", &Options::reconnect_max_ms,
               "longest reconnect backoff"},
    // At most half a tcp queue (256): the other half carries one-sided work.
    OptionSpec{"link.recv_slots", "--link-recv-slots", &Options::link_recv_slots,
               "receive slots per link (and as many send slots)", Range(4, 128)},
    OptionSpec{"link.slot_bytes", "--link-slot-bytes", &Options::link_slot_bytes,
               "bytes per link slot (one message fragment)", Range(4096, int64_t{16} << 20)},
    OptionSpec{"link.stripe_min_bytes", "--stripe-min-bytes", &Options::stripe_min_bytes,
               "transfers of at least this many bytes are striped over a link's rails",
               AtLeast(4096)},
    OptionSpec{"link.slice_bytes",
               "--slice-bytes",
               &Options::slice_bytes,
               "piece a striped transfer is cut into, each sent on one rail",
               {Kind::kPowerOfTwo, 4096, int64_t{64} << 20}},
    OptionSpec{"link.rail_min_share", "--rail-min-share", &Options::rail_min_share,
               "percent of the fastest rail's throughput below which a rail is left out of "
               "striping",
               Range(0, 100)},
    OptionSpec{"link.rail_hold_down_ms", "--rail-hold-down-ms", &Options::rail_hold_down_ms,
               "a failed rail is held down this long before it is probed again", Range(0, 600'000)},
    OptionSpec{"link.rail_probe_ms", "--rail-probe-ms", &Options::rail_probe_ms,
               "time a rail's connection (its probe) has to come up", Range(100, 60'000)},
    OptionSpec{"peer_limits.max_connections", "--peer-max-connections",
               &Options::peer_max_connections,
               "peer-port connections at once; 0: a quarter of what max_open_files leaves"},
    OptionSpec{"peer_limits.max_connections_per_address", "--peer-max-connections-per-address",
               &Options::peer_max_connections_per_address,
               "peer-port connections from one address at once", AtLeast(1)},
    OptionSpec{"peer_limits.auth_timeout_ms", "--auth-timeout-ms", &Options::auth_timeout_ms,
               "longest a peer may take over each stage of authentication", Range(100, 600'000)},
    OptionSpec{"peer_limits.auth_per_address", "--auth-per-address", &Options::auth_per_address,
               "authentications in progress from one address at once", Range(1, 32)},
    OptionSpec{"fabric.store", "--fabric-store", &Options::fabric_store,
               "membership store, etcd://HOST:PORT[,HOST:PORT...] (with a fabric key)"},
    OptionSpec{"fabric.file", "--fabric-file", &Options::fabric_file,
               "static fabric file: hosts, addresses, cables (instead of a store)"},
    OptionSpec{"fabric.name", "--fabric-name", &Options::fabric_name,
               "the fabric's name (its keys live under /mcdma/fabrics/NAME/)"},
    OptionSpec{"fabric.lease_ttl_ms", "--fabric-lease-ttl-ms", &Options::fabric_lease_ttl_ms,
               "this host's lease in the store; a dead host is evicted within it",
               Range(2000, 600'000)},
    OptionSpec{"fabric.interfaces", "--fabric-interfaces", &Options::fabric_interfaces,
               "interfaces (patterns, comma-separated) whose addresses are fabric cables "
               "(default: every one up but loopback)"},
    OptionSpec{"fabric.transport",
               "--fabric-transport",
               &Options::fabric_transport,
               "transport of the links the fabric makes: auto, tcp, verbs",
               {Kind::kOneOf, 0, 0, kTransports}},
    OptionSpec{"tls.cert", "--tls-cert", &Options::tls_cert,
               "peer service TLS certificate, PEM (with tls.key and tls.ca)"},
    OptionSpec{"tls.key", "--tls-key", &Options::tls_key, "peer service TLS private key, PEM"},
    OptionSpec{"tls.ca", "--tls-ca", &Options::tls_ca,
               "CA that signs the peers' certificates, PEM"},
    OptionSpec{"verbs.device", "--verbs-device", &Options::verbs_device,
               "RDMA device for verbs links (default: the first with an ACTIVE port)"},
    OptionSpec{"verbs.port", "--verbs-port", &Options::verbs_port, "port of the RDMA device",
               Range(1, 255)},
    OptionSpec{"verbs.interface", "--verbs-interface", &Options::verbs_interface,
               "interface peers are reached on (its RoCE v2 GID is used)"},
    OptionSpec{"verbs.gid_index", "--verbs-gid-index", &Options::verbs_gid_index,
               "GID index used when no RoCE v2 IPv4-mapped GID matches; -1: none",
               Range(-1, 65535)},
    OptionSpec{"verbs.profile",
               "--verbs-profile",
               &Options::verbs_profile,
               "device profile: linux-rc, mcdma-cx5, apple-tb5 (default: detected)",
               {Kind::kEmptyOrOneOf, 0, 0, kProfiles}},
};

// 1073741824 -> "1 GiB", 16777216 -> "16 MiB"; other numbers as they are.
std::string Amount(int64_t v) {
  constexpr int64_t kMiB = int64_t{1} << 20;
  if (v >= kMiB && v % (kMiB << 10) == 0) return std::to_string(v >> 30) + " GiB";
  if (v >= kMiB && v % kMiB == 0) return std::to_string(v >> 20) + " MiB";
  return std::to_string(v);
}

std::string Join(std::span<const std::string_view> words) {
  std::string out;
  for (std::string_view w : words) {
    if (!out.empty()) out += ", ";
    out += w;
  }
  return out;
}

Status Invalid(const OptionSpec& row, const std::string& what) {
  return Status(Code::kInvalid, std::string(row.key) + ": " + what);
}

// `v` is the value clamped to int64_t; `text` the value as it is.
Status CheckInteger(const OptionSpec& row, int64_t v, const std::string& text) {
  const OptionBounds& b = row.bounds;
  if (b.kind == Kind::kPowerOfTwo) {
    if (v < b.min || v > b.max || !shm::IsPowerOfTwo(static_cast<uint64_t>(v))) {
      return Invalid(row, "must be a power of two in [" + Amount(b.min) + ", " + Amount(b.max) +
                              "], got " + text);
    }
    return Status::Ok();
  }
  if (b.kind != Kind::kRange || (v >= b.min && v <= b.max)) return Status::Ok();
  std::string got = ", got " + text;
  if (b.max == kNoMax) {
    return Invalid(row,
                   (b.min == 1 ? std::string("must be > 0") : "must be >= " + Amount(b.min)) + got);
  }
  if (b.min == 0) return Invalid(row, "at most " + Amount(b.max) + got);
  return Invalid(row, "must be in [" + Amount(b.min) + ", " + Amount(b.max) + "]" + got);
}

Status CheckString(const OptionSpec& row, const std::string& v) {
  const OptionBounds& b = row.bounds;
  if (b.kind != Kind::kOneOf && b.kind != Kind::kEmptyOrOneOf) return Status::Ok();
  if (v.empty() && b.kind == Kind::kEmptyOrOneOf) return Status::Ok();
  for (std::string_view choice : b.choices) {
    if (v == choice) return Status::Ok();
  }
  return Invalid(row, "'" + v + "' is not one of " + Join(b.choices));
}

}  // namespace

std::span<const OptionSpec> OptionTable() { return kTable; }

const OptionSpec* FindOption(std::string_view key) {
  for (const OptionSpec& row : kTable) {
    if (row.key == key) return &row;
  }
  return nullptr;
}

Status CheckBounds(const OptionSpec& row, const Options& options) {
  return std::visit(
      [&](auto member) -> Status {
        const auto& value = options.*member;
        if constexpr (std::is_same_v<std::decay_t<decltype(value)>, std::string>) {
          return CheckString(row, value);
        } else {
          // A uint64_t above INT64_MAX exceeds every bound but "no max".
          int64_t clamped = static_cast<int64_t>(value);
          if constexpr (std::is_same_v<std::decay_t<decltype(value)>, uint64_t>) {
            if (value > static_cast<uint64_t>(kNoMax)) clamped = kNoMax;
          }
          return CheckInteger(row, clamped, std::to_string(value));
        }
      },
      row.field);
}

void CopyOption(const OptionSpec& row, const Options& from, Options& to) {
  std::visit([&](auto member) { to.*member = from.*member; }, row.field);
}

std::string OptionValueText(const OptionSpec& row, const Options& options) {
  return std::visit(
      [&](auto member) -> std::string {
        const auto& value = options.*member;
        if constexpr (std::is_same_v<std::decay_t<decltype(value)>, std::string>) {
          return value;
        } else {
          return std::to_string(value);
        }
      },
      row.field);
}

}  // namespace mcdma::daemon
