#include "config/options.hpp"

#include <arpa/inet.h>
#include <grp.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <type_traits>

#include "config/option_table.hpp"
#include "mcdma_auth/peer_auth.hpp"
#include "platform/names.hpp"
#include "platform/paths.hpp"

namespace mcdma::daemon {
namespace {

// Sets an integer field from a TOML value; it must fit the field's type.
template <typename T>
Status SetInteger(const toml::node& n, const std::string& key, T& field) {
  // Integers only: toml++'s value<int64_t>() on a float casts it before
  // checking its range (undefined for 1e19), and 5000.0 is not a count.
  const toml::value<int64_t>* integer = n.as_integer();
  std::optional<int64_t> v;
  if (integer != nullptr) v = integer->get();
  if constexpr (std::is_signed_v<T>) {
    if (!v || *v < std::numeric_limits<T>::min() || *v > std::numeric_limits<T>::max())
      return Status(Code::kInvalid, key + ": expected an integer");
  } else {
    if (!v || *v < 0) return Status(Code::kInvalid, key + ": expected a non-negative integer");
    if (static_cast<uint64_t>(*v) > std::numeric_limits<T>::max())
      return Status(Code::kInvalid, key + ": expected an integer at most " +
                                        std::to_string(std::numeric_limits<T>::max()));
  }
  field = static_cast<T>(*v);
  return Status::Ok();
}

Status SetString(const toml::node& n, const std::string& key, std::string& field) {
  auto v = n.value<std::string>();
  if (!v) return Status(Code::kInvalid, key + ": expected a string");
  field = *v;
  return Status::Ok();
}

// Sets the table row's field from a TOML value: its type is checked here,
// its bounds by Validate().
Status SetFromToml(const OptionSpec& row, const toml::node& n, Options& options) {
  const std::string key(row.key);
  return std::visit(
      [&](auto member) -> Status {
        auto& field = options.*member;
        if constexpr (std::is_same_v<std::decay_t<decltype(field)>, std::string>) {
          return SetString(n, key, field);
        } else {
          return SetInteger(n, key, field);
        }
      },
      row.field);
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
    const std::map<std::string_view, std::string*> fields = {
        {"name", &peer.name}, {"address", &peer.address}, {"transport", &peer.transport}};
    for (const auto& [k, v] : *t) {
      std::string key = where;
      key += ".";
      key += k.str();
      auto it = fields.find(k.str());
      if (it == fields.end()) return Status(Code::kInvalid, key + ": unknown configuration key");
      MCDMA_RETURN_IF_ERROR(SetString(v, key, *it->second));
    }
    peers.push_back(std::move(peer));
  }
  return Status::Ok();
}

// [[rail]] tables: address, name, transport. Their values are checked by
// Validate(), as --rail's are.
Status LoadRails(const toml::node& node, std::vector<RailConfig>& rails) {
  const toml::array* list = node.as_array();
  if (list == nullptr) return Status(Code::kInvalid, "rail: expected [[rail]] tables");
  for (size_t i = 0; i < list->size(); ++i) {
    std::string where = "rail[" + std::to_string(i) + "]";
    const toml::table* t = (*list)[i].as_table();
    if (t == nullptr) return Status(Code::kInvalid, where + ": expected a table");
    RailConfig rail;
    const std::map<std::string_view, std::string*> fields = {
        {"name", &rail.name}, {"address", &rail.address}, {"transport", &rail.transport}};
    for (const auto& [k, v] : *t) {
      std::string key = where + "." + std::string(k.str());
      auto it = fields.find(k.str());
      if (it == fields.end()) return Status(Code::kInvalid, key + ": unknown configuration key");
      MCDMA_RETURN_IF_ERROR(SetString(v, key, *it->second));
    }
    rails.push_back(std::move(rail));
  }
  return Status::Ok();
}

// [[rdma]] tables: device, port, profile, interface, gid_index. Checked by
// Validate(), as --rdma's are.
Status LoadRdma(const toml::node& node, std::vector<RdmaConfig>& out) {
  const toml::array* list = node.as_array();
  if (list == nullptr) return Status(Code::kInvalid, "rdma: expected [[rdma]] tables");
  for (size_t i = 0; i < list->size(); ++i) {
    std::string where = "rdma[" + std::to_string(i) + "]";
    const toml::table* t = (*list)[i].as_table();
    if (t == nullptr) return Status(Code::kInvalid, where + ": expected a table");
    RdmaConfig r;
    for (const auto& [k, v] : *t) {
      std::string key = where + "." + std::string(k.str());
      if (k.str() == "device") {
        MCDMA_RETURN_IF_ERROR(SetString(v, key, r.device));
      } else if (k.str() == "port") {
        MCDMA_RETURN_IF_ERROR(SetInteger(v, key, r.port));
      } else if (k.str() == "profile") {
        MCDMA_RETURN_IF_ERROR(SetString(v, key, r.profile));
      } else if (k.str() == "interface") {
        MCDMA_RETURN_IF_ERROR(SetString(v, key, r.interface));
      } else if (k.str() == "gid_index") {
        MCDMA_RETURN_IF_ERROR(SetInteger(v, key, r.gid_index));
      } else {
        return Status(Code::kInvalid, key + ": unknown configuration key");
      }
    }
    out.push_back(std::move(r));
  }
  return Status::Ok();
}

// [[reserve]] tables: prefix, uid.
Status LoadReservations(const toml::node& node, std::vector<NameReservation>& out) {
  const toml::array* list = node.as_array();
  if (list == nullptr) return Status(Code::kInvalid, "reserve: expected [[reserve]] tables");
  for (size_t i = 0; i < list->size(); ++i) {
    std::string where = "reserve[" + std::to_string(i) + "]";
    const toml::table* t = (*list)[i].as_table();
    if (t == nullptr) return Status(Code::kInvalid, where + ": expected a table");
    NameReservation r;
    bool have_uid = false;
    for (const auto& [k, v] : *t) {
      std::string key = where + "." + std::string(k.str());
      if (k.str() == "prefix") {
        MCDMA_RETURN_IF_ERROR(SetString(v, key, r.prefix));
      } else if (k.str() == "uid") {
        MCDMA_RETURN_IF_ERROR(SetInteger(v, key, r.uid));
        have_uid = true;
      } else {
        return Status(Code::kInvalid, key + ": unknown configuration key");
      }
    }
    if (r.prefix.empty() || !have_uid) {
      return Status(Code::kInvalid, where + ": needs prefix and uid");
    }
    out.push_back(std::move(r));
  }
  return Status::Ok();
}

Status Walk(const toml::table& table, const std::string& prefix, Options& options) {
  for (const auto& [k, node] : table) {
    std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (key == "peer") {
      MCDMA_RETURN_IF_ERROR(LoadPeers(node, options.peers));
      continue;
    }
    if (key == "reserve") {
      MCDMA_RETURN_IF_ERROR(LoadReservations(node, options.reservations));
      continue;
    }
    if (key == "rail") {
      MCDMA_RETURN_IF_ERROR(LoadRails(node, options.rails));
      continue;
    }
    if (key == "rdma") {
      MCDMA_RETURN_IF_ERROR(LoadRdma(node, options.rdma));
      continue;
    }
    if (const toml::table* sub = node.as_table()) {
      MCDMA_RETURN_IF_ERROR(Walk(*sub, key, options));
      continue;
    }
    const OptionSpec* row = FindOption(key);
    if (row == nullptr) return Status(Code::kInvalid, key + ": unknown configuration key");
    MCDMA_RETURN_IF_ERROR(SetFromToml(*row, node, options));
  }
  return Status::Ok();
}

// An IP literal's family and bytes (v4 in the first 4), so that two
// spellings of one address compare equal; nullopt if `text` is none.
std::optional<std::pair<int, std::array<unsigned char, 16>>> ParseIp(const std::string& text) {
  std::array<unsigned char, 16> bytes{};
  if (inet_pton(AF_INET, text.c_str(), bytes.data()) == 1) return std::make_pair(AF_INET, bytes);
  if (inet_pton(AF_INET6, text.c_str(), bytes.data()) == 1) return std::make_pair(AF_INET6, bytes);
  return std::nullopt;
}

// Rail names are exchanged in Hello and shown as "LOCAL>REMOTE".
constexpr size_t kMaxRailNameBytes = 64;

// One rail: transport, address (an IP literal), name (defaulted here).
Status ValidateRail(RailConfig& rail, const std::string& where) {
  if (rail.transport != "tcp")
    return Status(Code::kInvalid, where +
                                      ".transport: only \"tcp\" rails are configured; RDMA "
                                      "rails come from the devices");
  if (rail.address.empty()) return Status(Code::kInvalid, where + ".address: missing");
  auto ip = ParseIp(rail.address);
  if (!ip) {
    return Status(Code::kInvalid, where + ".address: '" + rail.address +
                                      "' is not an IP address (an interface's IPv4 or IPv6 "
                                      "address, no port, no host name)");
  }
  if (ip->second == std::array<unsigned char, 16>{}) {
    return Status(Code::kInvalid, where + ".address: '" + rail.address +
                                      "' is the unspecified address, not an interface's");
  }
  if (rail.name.empty()) rail.name = "tcp:" + rail.address;
  if (rail.name.size() > kMaxRailNameBytes ||
      rail.name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                  "0123456789._:-") != std::string::npos) {
    return Status(Code::kInvalid, where + ".name: '" + rail.name + "': 1.." +
                                      std::to_string(kMaxRailNameBytes) +
                                      " characters of [A-Za-z0-9._:-]");
  }
  return Status::Ok();
}

// Fills each rail's default name; names and addresses must be unique.
Status ValidateRails(std::vector<RailConfig>& rails) {
  std::set<std::string> names;
  std::set<std::pair<int, std::array<unsigned char, 16>>> addresses;
  for (size_t i = 0; i < rails.size(); ++i) {
    RailConfig& rail = rails[i];
    std::string where = "rail[" + std::to_string(i) + "]";
    MCDMA_RETURN_IF_ERROR(ValidateRail(rail, where));
    auto ip = ParseIp(rail.address);  // valid: ValidateRail() checked it
    if (ip && !addresses.insert(*ip).second)
      return Status(Code::kInvalid, where + ".address: '" + rail.address + "' is listed twice");
    if (!names.insert(rail.name).second)
      return Status(Code::kInvalid, where + ".name: '" + rail.name + "' is listed twice");
  }
  return Status::Ok();
}

// The [[rdma]] list: at most kMaxRdmaDevices, each a device name and a
// port in 1..255, a known profile, no (device, port) twice.
Status ValidateRdma(const std::vector<RdmaConfig>& list) {
  if (list.size() > kMaxRdmaDevices)
    return Status(Code::kInvalid, "rdma: " + std::to_string(list.size()) +
                                      " device ports listed; at most " +
                                      std::to_string(kMaxRdmaDevices));
  std::set<std::pair<std::string, uint32_t>> seen;
  for (size_t i = 0; i < list.size(); ++i) {
    const RdmaConfig& r = list[i];
    std::string where = "rdma[" + std::to_string(i) + "]";
    if (r.device.empty() || r.device.size() > 64 ||
        r.device.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                   "0123456789._-") != std::string::npos)
      return Status(Code::kInvalid,
                    where + ".device: '" + r.device + "': 1..64 characters of [A-Za-z0-9._-]");
    if (r.port < 1 || r.port > 255)
      return Status(Code::kInvalid,
                    where + ".port: " + std::to_string(r.port) + " is not in 1..255");
    if (!r.profile.empty() && r.profile != "linux-rc" && r.profile != "mcdma-cx5" &&
        r.profile != "apple-tb5")
      return Status(Code::kInvalid, where + ".profile: '" + r.profile +
                                        "': expected linux-rc, mcdma-cx5 or apple-tb5");
    if (r.gid_index < -1 || r.gid_index > 65535)
      return Status(Code::kInvalid, where + ".gid_index: must be in -1..65535");
    if (!seen.emplace(r.device, r.port).second)
      return Status(Code::kInvalid, where + ": device " + r.device + " port " +
                                        std::to_string(r.port) + " is listed twice");
  }
  return Status::Ok();
}

// [fabric]: a store or a file (not both), with a fabric key; a name that
// can be a key segment in the store.
Status ValidateFabric(const Options& o) {
  if (o.fabric_store.empty() && o.fabric_file.empty()) return Status::Ok();
  if (!o.fabric_store.empty() && !o.fabric_file.empty())
    return Status(Code::kInvalid, "fabric.store and fabric.file: give one, not both");
  if (o.fabric_key.empty())
    return Status(Code::kInvalid,
                  "fabric_key: required with fabric.store or fabric.file (the store says who "
                  "exists, the key who is trusted)");
  if (!o.fabric_store.empty() && o.fabric_store.rfind("etcd://", 0) != 0)
    return Status(Code::kInvalid, "fabric.store: expected etcd://HOST:PORT[,HOST:PORT...], got '" +
                                      o.fabric_store + "'");
  const std::string& n = o.fabric_name;
  bool ok = !n.empty() && n.size() <= 64;
  for (char c : n) {
    ok = ok &&
         (std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' || c == '.');
  }
  if (!ok || n == "." || n == "..")
    return Status(Code::kInvalid,
                  "fabric.name: 1 to 64 of A-Z a-z 0-9 - _ . expected, got '" + n + "'");
  return Status::Ok();
}

Status ValidatePeering(Options& o) {
  if (auto hp = SplitHostPort(o.listen, kDefaultPeerPort); !hp.ok())
    return Status(Code::kInvalid, "listen: " + hp.status().message());
  if (!o.data_listen.empty()) {
    if (auto hp = SplitHostPort(o.data_listen, 0); !hp.ok())
      return Status(Code::kInvalid, "data_listen: " + hp.status().message());
  }
  if (o.link_timeout_ms < 2 * o.heartbeat_ms)
    return Status(Code::kInvalid, "link.timeout_ms: must be at least twice heartbeat_ms");
  if (o.reconnect_min_ms == 0 || o.reconnect_max_ms < o.reconnect_min_ms)
    return Status(Code::kInvalid, "link.reconnect_min_ms/reconnect_max_ms: need 0 < min <= max");
  if (o.tls_cert.empty() != o.tls_key.empty())
    return Status(Code::kInvalid, "tls.cert and tls.key: give both or neither");
  if (!o.tls_cert.empty() && o.tls_ca.empty())
    return Status(Code::kInvalid,
                  "tls.ca: required with tls.cert (peers' certificates are verified)");
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
  MCDMA_RETURN_IF_ERROR(ValidateFabric(o));
  return ValidateRails(o.rails);
}

}  // namespace

Result<RdmaConfig> ParseRdmaFlag(const std::string& text) {
  RdmaConfig r;
  const std::string usage =
      "--rdma " + text + ": expected device=NAME[,port=N][,profile=P][,interface=IF][,gid-index=N]";
  std::istringstream parts(text);
  std::string part;
  while (std::getline(parts, part, ',')) {
    size_t eq = part.find('=');
    if (eq == std::string::npos) return Status(Code::kInvalid, usage);
    std::string key = part.substr(0, eq);
    std::string value = part.substr(eq + 1);
    auto number = [&](auto& field, long lo, long hi) -> Status {
      char* end = nullptr;
      errno = 0;
      long v = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || errno != 0 || v < lo || v > hi) {
        std::string why = usage;
        why += " (";
        why += key;
        why += " '";
        why += value;
        why += "' is not a number in ";
        why += std::to_string(lo);
        why += "..";
        why += std::to_string(hi);
        why += ")";
        return Status(Code::kInvalid, why);
      }
      field = static_cast<std::remove_reference_t<decltype(field)>>(v);
      return Status::Ok();
    };
    if (key == "device") {
      r.device = value;
    } else if (key == "port") {
      MCDMA_RETURN_IF_ERROR(number(r.port, 1, 255));
    } else if (key == "profile") {
      r.profile = value;
    } else if (key == "interface") {
      r.interface = value;
    } else if (key == "gid-index") {
      MCDMA_RETURN_IF_ERROR(number(r.gid_index, -1, 65535));
    } else {
      std::string why = usage;
      why += " (unknown key '";
      why += key;
      why += "')";
      return Status(Code::kInvalid, why);
    }
  }
  if (r.device.empty()) return Status(Code::kInvalid, usage + " (device= is missing)");
  return r;
}

std::optional<uint32_t> ReservedFor(const std::vector<NameReservation>& reservations,
                                    const std::string& name) {
  const NameReservation* best = nullptr;
  for (const NameReservation& r : reservations) {
    if (name.rfind(r.prefix, 0) == 0 && (best == nullptr || r.prefix.size() > best->prefix.size()))
      best = &r;
  }
  if (best == nullptr) return std::nullopt;
  return best->uid;
}

Result<NameReservation> ParseReservation(const std::string& text) {
  auto eq = text.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    return Status(Code::kInvalid, "--reserve " + text + ": expected PREFIX=UID");
  }
  NameReservation r;
  r.prefix = text.substr(0, eq);
  try {
    size_t used = 0;
    unsigned long uid = std::stoul(text.substr(eq + 1), &used);
    if (used != text.size() - eq - 1 || uid > UINT32_MAX) throw std::out_of_range("uid");
    r.uid = static_cast<uint32_t>(uid);
  } catch (const std::exception&) {
    return Status(Code::kInvalid, "--reserve " + text + ": the uid must be a number");
  }
  return r;
}

Status LoadTomlFile(const std::string& path, Options& options) {
  toml::table table;
  try {
    table = toml::parse_file(path);
  } catch (const toml::parse_error& err) {
    return Status(Code::kInvalid, path + ":" + std::to_string(err.source().begin.line) + ":" +
                                      std::to_string(err.source().begin.column) + ": " +
                                      std::string(err.description()));
  }
  Status st = Walk(table, "", options);
  if (!st.ok()) return Status(st.code(), path + ": " + st.message());
  return Status::Ok();
}

Status Validate(Options& o) {
  if (o.socket.empty()) o.socket = platform::DaemonSocketPath();
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
  // Each option's own bounds (the table's), then the relations between them.
  for (const OptionSpec& row : OptionTable()) MCDMA_RETURN_IF_ERROR(CheckBounds(row, o));
  if (o.arena_bytes < uint64_t{64} * 1024 || o.arena_bytes > o.max_arena_bytes) {
    return Status(Code::kInvalid,
                  "mailbox.arena_bytes: must be in [64 KiB, mailbox.max_arena_bytes]");
  }
  for (size_t i = 0; i < o.reservations.size(); ++i) {
    const std::string& prefix = o.reservations[i].prefix;
    bool ok = !prefix.empty() && prefix.size() <= 128 &&
              prefix.find_first_not_of(
                  "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                  "0123456789._:/-") == std::string::npos;
    if (!ok) {
      return Status(Code::kInvalid, "reserve[" + std::to_string(i) + "].prefix '" + prefix +
                                        "': 1..128 characters of [A-Za-z0-9._:/-]");
    }
  }
  MCDMA_RETURN_IF_ERROR(ValidateRdma(o.rdma));
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
