#include "options.hpp"

#include <grp.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <functional>
#include <map>
#include <set>

#include "mcdma/client.hpp"
#include "mcdma_internal/mailbox_layout.hpp"
#include "mcdma_internal/peer_auth.hpp"
#include "platform/names.hpp"

namespace mcdma::daemon {
namespace {

using Setter = std::function<Status(const toml::node&, const std::string& key)>;

template <typename T>
Setter Int(T& field) {
  return [&field](const toml::node& n, const std::string& key) -> Status {
    auto v = n.value<int64_t>();
    if (!v || *v < 0) return Status(Code::kInvalid, key + ": expected a non-negative integer");
    field = static_cast<T>(*v);
    return Status::Ok();
  };
}

// Also negative values (-1 = unset).
Setter SignedInt(int32_t& field) {
  return [&field](const toml::node& n, const std::string& key) -> Status {
    auto v = n.value<int64_t>();
    if (!v || *v < -1 || *v > 65535)
      return Status(Code::kInvalid, key + ": expected an integer in [-1, 65535]");
    field = static_cast<int32_t>(*v);
    return Status::Ok();
  };
}

Setter Str(std::string& field) {
  return [&field](const toml::node& n, const std::string& key) -> Status {
    auto v = n.value<std::string>();
    if (!v) return Status(Code::kInvalid, key + ": expected a string");
    field = *v;
    return Status::Ok();
  };
}

std::map<std::string, Setter> Setters(Options& o) {
  return {
      {"socket", Str(o.socket)},
      {"socket_group", Str(o.socket_group)},
      {"host_id", Str(o.host_id)},
      {"log_level", Str(o.log_level)},
      {"drain_timeout_ms", Int(o.drain_timeout_ms)},
      {"engine.spin_budget_us", Int(o.spin_budget_us)},
      {"engine.transfer_chunk_bytes", Int(o.transfer_chunk_bytes)},
      {"mailbox.submission_entries", Int(o.submission_entries)},
      {"mailbox.completion_entries", Int(o.completion_entries)},
      {"mailbox.inbox_entries", Int(o.inbox_entries)},
      {"mailbox.arena_bytes", Int(o.arena_bytes)},
      {"mailbox.max_arena_bytes", Int(o.max_arena_bytes)},
      {"mailbox.attach_timeout_ms", Int(o.attach_timeout_ms)},
      {"limits.max_buffer_bytes", Int(o.max_buffer_bytes)},
      {"limits.max_buffers_per_session", Int(o.max_buffers_per_session)},
      {"limits.max_sessions", Int(o.max_sessions)},
      {"limits.default_timeout_ms", Int(o.default_timeout_ms)},
      {"limits.max_ring_faults", Int(o.max_ring_faults)},
      {"limits.max_backlog", Int(o.max_backlog)},
      {"fabric_key", Str(o.fabric_key)},
      {"listen", Str(o.listen)},
      {"data_listen", Str(o.data_listen)},
      {"link.heartbeat_ms", Int(o.heartbeat_ms)},
      {"link.timeout_ms", Int(o.link_timeout_ms)},
      {"link.reconnect_min_ms", Int(o.reconnect_min_ms)},
      {"link.reconnect_max_ms", Int(o.reconnect_max_ms)},
      {"link.recv_slots", Int(o.link_recv_slots)},
      {"link.slot_bytes", Int(o.link_slot_bytes)},
      {"tls.cert", Str(o.tls_cert)},
      {"tls.key", Str(o.tls_key)},
      {"tls.ca", Str(o.tls_ca)},
      {"verbs.device", Str(o.verbs_device)},
      {"verbs.port", Int(o.verbs_port)},
      {"verbs.interface", Str(o.verbs_interface)},
      {"verbs.gid_index", SignedInt(o.verbs_gid_index)},
      {"verbs.profile", Str(o.verbs_profile)},
  };
}

// [[peer]] tables: name, address, transport.
Status LoadPeers(const toml::node& node, std::vector<PeerConfig>& peers) {
  const toml::array* list = node.as_array();
  if (list == nullptr) return Status(Code::kInvalid, "peer: expected [[peer]] tables");
  for (size_t i = 0; i < list->size(); ++i) {
    std::string where = "peer[" + std::to_string(i) + "]";
    const toml::table* t = (*list)[i].as_table();
    if (t == nullptr) return Status(Code::kInvalid, where + ": expected a table");
    PeerConfig peer;
    std::map<std::string, Setter> setters = {{"name", Str(peer.name)},
                                             {"address", Str(peer.address)},
                                             {"transport", Str(peer.transport)}};
    for (const auto& [k, v] : *t) {
      std::string key = where;
      key += ".";
      key += k.str();
      auto it = setters.find(std::string(k.str()));
      if (it == setters.end()) return Status(Code::kInvalid, key + ": unknown configuration key");
      MCDMA_RETURN_IF_ERROR(it->second(v, key));
    }
    peers.push_back(std::move(peer));
  }
  return Status::Ok();
}

Status Walk(const toml::table& table, const std::string& prefix,
            std::map<std::string, Setter>& setters, Options& options) {
  for (const auto& [k, node] : table) {
    std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (key == "peer") {
      MCDMA_RETURN_IF_ERROR(LoadPeers(node, options.peers));
      continue;
    }
    if (const toml::table* sub = node.as_table()) {
      MCDMA_RETURN_IF_ERROR(Walk(*sub, key, setters, options));
      continue;
    }
    auto it = setters.find(key);
    if (it == setters.end()) return Status(Code::kInvalid, key + ": unknown configuration key");
    MCDMA_RETURN_IF_ERROR(it->second(node, key));
  }
  return Status::Ok();
}

Status Pow2(uint32_t v, const char* key) {
  if (!shm::IsPowerOfTwo(v) || v < 8 || v > shm::kMaxRingEntries) {
    return Status(
        Code::kInvalid,
        std::string(key) + ": must be a power of two in [8, 65536], got " + std::to_string(v));
  }
  return Status::Ok();
}

Status ValidatePeering(Options& o) {
  if (auto hp = SplitHostPort(o.listen, kDefaultPeerPort); !hp.ok())
    return Status(Code::kInvalid, "listen: " + hp.status().message());
  if (!o.data_listen.empty()) {
    if (auto hp = SplitHostPort(o.data_listen, 0); !hp.ok())
      return Status(Code::kInvalid, "data_listen: " + hp.status().message());
  }
  if (o.heartbeat_ms < 10 || o.heartbeat_ms > 60'000)
    return Status(Code::kInvalid, "link.heartbeat_ms: must be in [10, 60000]");
  if (o.link_timeout_ms < 2 * o.heartbeat_ms)
    return Status(Code::kInvalid, "link.timeout_ms: must be at least twice heartbeat_ms");
  if (o.reconnect_min_ms == 0 || o.reconnect_max_ms < o.reconnect_min_ms)
    return Status(Code::kInvalid, "link.reconnect_min_ms/reconnect_max_ms: need 0 < min <= max");
  // At most half a tcp queue (256): the other half carries one-sided work.
  if (o.link_recv_slots < 4 || o.link_recv_slots > 128)
    return Status(Code::kInvalid, "link.recv_slots: must be in [4, 128]");
  if (o.link_slot_bytes < 4096 || o.link_slot_bytes > (16u << 20))
    return Status(Code::kInvalid, "link.slot_bytes: must be in [4096, 16 MiB]");
  if (o.tls_cert.empty() != o.tls_key.empty())
    return Status(Code::kInvalid, "tls.cert and tls.key: give both or neither");
  if (!o.tls_cert.empty() && o.tls_ca.empty())
    return Status(Code::kInvalid,
                  "tls.ca: required with tls.cert (peers' certificates are verified)");
  if (o.verbs_port < 1 || o.verbs_port > 255)
    return Status(Code::kInvalid, "verbs.port: must be in [1, 255]");
  if (!o.verbs_profile.empty() && o.verbs_profile != "linux-rc" && o.verbs_profile != "mcdma-cx5" &&
      o.verbs_profile != "apple-tb5") {
    return Status(Code::kInvalid, "verbs.profile: '" + o.verbs_profile +
                                      "' is not one of linux-rc, mcdma-cx5, apple-tb5");
  }
  if (!o.peers.empty() && o.fabric_key.empty())
    return Status(Code::kInvalid, "fabric_key: required when peers are configured");
  std::set<std::string> names;
  for (size_t i = 0; i < o.peers.size(); ++i) {
    std::string where = "peer[" + std::to_string(i) + "]";
    MCDMA_RETURN_IF_ERROR(ValidatePeer(o.peers[i], where));
    if (o.peers[i].name == o.host_id)
      return Status(Code::kInvalid, where + ".name: '" + o.host_id + "' is this host's own id");
    if (!names.insert(o.peers[i].name).second)
      return Status(Code::kInvalid, where + ".name: '" + o.peers[i].name + "' is listed twice");
  }
  return Status::Ok();
}

}  // namespace

Status LoadTomlFile(const std::string& path, Options& options) {
  toml::table table;
  try {
    table = toml::parse_file(path);
  } catch (const toml::parse_error& err) {
    return Status(Code::kInvalid, path + ":" + std::to_string(err.source().begin.line) + ":" +
                                      std::to_string(err.source().begin.column) + ": " +
                                      std::string(err.description()));
  }
  auto setters = Setters(options);
  Status st = Walk(table, "", setters, options);
  if (!st.ok()) return Status(st.code(), path + ": " + st.message());
  return Status::Ok();
}

Status Validate(Options& o) {
  if (o.socket.empty()) o.socket = DefaultSocketPath();
  if (Status st = platform::CheckUnixSocketPath(o.socket); !st.ok()) {
    return Status(Code::kInvalid, "socket: " + st.message());
  }
  if (!o.socket_group.empty() && getgrnam(o.socket_group.c_str()) == nullptr) {
    return Status(Code::kInvalid, "socket_group: no group '" + o.socket_group +
                                      "' on this host (create it, or leave socket_group unset)");
  }
  if (o.host_id.empty()) {
    char name[256] = {};
    gethostname(name, sizeof(name) - 1);
    o.host_id = name;
  }
  static constexpr const char* kLevels[] = {"trace", "debug",    "info", "warn",
                                            "error", "critical", "off"};
  bool level_ok = false;
  for (const char* l : kLevels) level_ok |= (o.log_level == l);
  if (!level_ok)
    return Status(Code::kInvalid,
                  "log_level: expected one of trace, debug, info, warn, error, critical, off");
  MCDMA_RETURN_IF_ERROR(Pow2(o.submission_entries, "mailbox.submission_entries"));
  MCDMA_RETURN_IF_ERROR(Pow2(o.completion_entries, "mailbox.completion_entries"));
  MCDMA_RETURN_IF_ERROR(Pow2(o.inbox_entries, "mailbox.inbox_entries"));
  if (o.max_arena_bytes > shm::kMaxArenaBytes)
    return Status(Code::kInvalid, "mailbox.max_arena_bytes: at most 2 GiB");
  if (o.arena_bytes < uint64_t{64} * 1024 || o.arena_bytes > o.max_arena_bytes) {
    return Status(Code::kInvalid,
                  "mailbox.arena_bytes: must be in [64 KiB, mailbox.max_arena_bytes]");
  }
  if (o.max_buffer_bytes == 0)
    return Status(Code::kInvalid, "limits.max_buffer_bytes: must be > 0");
  if (o.max_sessions == 0) return Status(Code::kInvalid, "limits.max_sessions: must be > 0");
  if (o.default_timeout_ms == 0)
    return Status(Code::kInvalid, "limits.default_timeout_ms: must be > 0");
  if (o.max_backlog < 16) return Status(Code::kInvalid, "limits.max_backlog: must be >= 16");
  if (o.transfer_chunk_bytes < 4096 || o.transfer_chunk_bytes > (1ull << 30)) {
    return Status(Code::kInvalid, "engine.transfer_chunk_bytes: must be in [4096, 1 GiB]");
  }
  if (o.spin_budget_us > 1'000'000)
    return Status(Code::kInvalid, "engine.spin_budget_us: at most 1000000");
  return ValidatePeering(o);
}

Result<std::pair<std::string, uint16_t>> SplitHostPort(const std::string& text,
                                                       uint16_t default_port) {
  std::string host = text;
  std::string port;
  if (!text.empty() && text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string::npos) return Status(Code::kInvalid, "unclosed '[' in '" + text + "'");
    host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') return Status(Code::kInvalid, "junk after ']' in '" + text + "'");
      port = text.substr(close + 2);
    }
  } else if (auto colon = text.rfind(':'); colon != std::string::npos) {
    if (text.find(':') != colon)
      return Status(Code::kInvalid, "IPv6 address '" + text + "' must be written [addr]:port");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (host.empty() || host.find_first_of(" \t/") != std::string::npos)
    return Status(Code::kInvalid, "bad host in '" + text + "'");
  uint16_t value = default_port;
  if (!port.empty() || text.back() == ':') {
    if (port.empty() || port.size() > 5 ||
        port.find_first_not_of("0123456789") != std::string::npos || std::stoul(port) > 65535)
      return Status(Code::kInvalid, "bad port in '" + text + "'");
    value = static_cast<uint16_t>(std::stoul(port));
  }
  return std::make_pair(host, value);
}

Status ValidatePeer(const PeerConfig& peer, const std::string& where) {
  if (Status st = peer_auth::ValidateHostId(peer.name); !st.ok())
    return Status(Code::kInvalid, where + ".name: " + st.message());
  if (peer.address.empty()) return Status(Code::kInvalid, where + ".address: missing");
  if (auto hp = SplitHostPort(peer.address, kDefaultPeerPort); !hp.ok())
    return Status(Code::kInvalid, where + ".address: " + hp.status().message());
  if (peer.transport != "auto" && peer.transport != "tcp" && peer.transport != "verbs")
    return Status(Code::kInvalid,
                  where + ".transport: expected \"auto\", \"tcp\" or \"verbs\", got \"" +
                      peer.transport + "\"");
  return Status::Ok();
}

}  // namespace mcdma::daemon
