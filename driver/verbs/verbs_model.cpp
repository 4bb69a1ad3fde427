#include "driver/verbs/verbs_model.hpp"

#include <algorithm>
#include <charconv>
#include <map>

#include "driver/profiles.hpp"

namespace mcdma::driver::verbs {
// The names this header exports are the table's rows.
static_assert(FindVerbsProfile(kProfileLinuxRc) == &kVerbsProfiles[0] &&
              FindVerbsProfile(kProfileMcdmaCx5) == &kVerbsProfiles[1] &&
              FindVerbsProfile(kProfileAppleTb5) == &kVerbsProfiles[2]);

namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

std::optional<uint64_t> Number(std::string_view v) {
  v = Trim(v);
  int base = 10;
  if (v.size() > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X')) {
    v.remove_prefix(2);
    base = 16;
  }
  uint64_t out = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out, base);
  if (ec != std::errc() || end != v.data() + v.size()) return std::nullopt;
  return out;
}

// "4: ACTIVE" -> kActive.
PortState ParseState(std::string_view v) {
  auto n = Number(v.substr(0, v.find(':')));
  if (!n || *n > 4) return PortState::kUnknown;
  return static_cast<PortState>(*n);
}

PortInfo& Port(DeviceInfo& d, uint8_t num) {
  for (auto& p : d.ports) {
    if (p.num == num) return p;
  }
  d.ports.push_back(PortInfo{});
  d.ports.back().num = num;
  return d.ports.back();
}

Gid& GidAt(PortInfo& p, uint32_t index) {
  for (auto& g : p.gids) {
    if (g.index == index) return g;
  }
  p.gids.push_back(Gid{});
  p.gids.back().index = index;
  return p.gids.back();
}

Status Bad(size_t line, const std::string& why) {
  return Status(Code::kInvalid, "device dump line " + std::to_string(line) + ": " + why);
}

// Applies one "ports/N/..." line.
Status ApplyPort(DeviceInfo& d, std::string_view path, std::string_view value, size_t line) {
  path.remove_prefix(6);  // "ports/"
  auto slash = path.find('/');
  auto num = Number(path.substr(0, slash));
  if (slash == std::string_view::npos || !num || *num == 0 || *num > 255)
    return Bad(line, "bad port number");
  PortInfo& p = Port(d, static_cast<uint8_t>(*num));
  std::string_view rest = path.substr(slash + 1);
  auto index_of = [&](std::string_view prefix) -> std::optional<uint32_t> {
    auto n = Number(rest.substr(prefix.size()));
    if (!n || *n > 65535) return std::nullopt;
    return static_cast<uint32_t>(*n);
  };
  if (rest == "state") {
    p.state = ParseState(value);
  } else if (rest == "link_layer") {
    p.link_layer = std::string(Trim(value));
  } else if (rest == "active_mtu" || rest == "max_mtu") {
    auto n = Number(value);
    if (!n || MtuCode(static_cast<uint32_t>(*n)) == 0) return Bad(line, "bad MTU");
    (rest == "active_mtu" ? p.active_mtu : p.max_mtu) = static_cast<uint32_t>(*n);
  } else if (rest.rfind("gids/", 0) == 0) {
    auto i = index_of("gids/");
    if (!i) return Bad(line, "bad GID index");
    GidAt(p, *i).value = std::string(Trim(value));
  } else if (rest.rfind("gid_attrs/types/", 0) == 0) {
    auto i = index_of("gid_attrs/types/");
    if (!i) return Bad(line, "bad GID index");
    std::string_view t = Trim(value);
    GidAt(p, *i).type = t == "RoCE v2"                          ? GidType::kRoceV2
                        : (t == "RoCE v1" || t == "IB/RoCE v1") ? GidType::kRoceV1
                                                                : GidType::kIb;
  } else if (rest.rfind("gid_attrs/ndevs/", 0) == 0) {
    auto i = index_of("gid_attrs/ndevs/");
    if (!i) return Bad(line, "bad GID index");
    GidAt(p, *i).netdev = std::string(Trim(value));
  }
  return Status::Ok();
}

}  // namespace

uint32_t MtuCode(uint32_t bytes) {
  switch (bytes) {
    case 256:
      return 1;
    case 512:
      return 2;
    case 1024:
      return 3;
    case 2048:
      return 4;
    case 4096:
      return 5;
    default:
      return 0;
  }
}

Result<std::vector<DeviceInfo>> ParseDeviceDump(std::string_view text) {
  std::map<std::string, DeviceInfo> devices;
  std::vector<std::string> order;
  size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    auto nl = text.find('\n');
    std::string_view line = Trim(text.substr(0, nl));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (line.empty() || line.front() == '#') continue;
    auto eq = line.find('=');
    auto slash = line.find('/');
    if (eq == std::string_view::npos || slash == std::string_view::npos || slash > eq)
      return Bad(line_no, "expected DEVICE/PATH=VALUE");
    std::string name(line.substr(0, slash));
    std::string_view path = line.substr(slash + 1, eq - slash - 1);
    std::string_view value = line.substr(eq + 1);
    auto [it, fresh] = devices.try_emplace(name);
    if (fresh) {
      it->second.name = name;
      order.push_back(name);
    }
    DeviceInfo& d = it->second;
    if (path == "driver") {
      d.driver = std::string(Trim(value));
    } else if (path == "transport") {
      auto n = Number(value);
      if (!n || *n > 0xffff) return Bad(line_no, "transport is not a number");
      d.transport = static_cast<uint32_t>(*n);
    } else if (path.rfind("attr/", 0) == 0) {
      auto n = Number(value);
      if (!n) return Bad(line_no, "attribute is not a number");
      std::string_view attr = path.substr(5);
      if (attr == "vendor_id") d.vendor_id = static_cast<uint32_t>(*n);
      if (attr == "vendor_part_id") d.vendor_part_id = static_cast<uint32_t>(*n);
      if (attr == "max_qp_wr") d.max_qp_wr = static_cast<uint32_t>(*n);
      if (attr == "max_qp_rd_atom") d.max_qp_rd_atom = static_cast<uint32_t>(*n);
      if (attr == "max_mr_size") d.max_mr_size = *n;
      if (attr == "max_mr") d.max_mr = static_cast<uint32_t>(*n);
      if (attr == "max_qp") d.max_qp = static_cast<uint32_t>(*n);
    } else if (path.rfind("ports/", 0) == 0) {
      MCDMA_RETURN_IF_ERROR(ApplyPort(d, path, value, line_no));
    }
  }
  std::vector<DeviceInfo> out;
  out.reserve(order.size());
  for (const auto& name : order) out.push_back(std::move(devices[name]));
  return out;
}

bool IsIpv4Mapped(const std::string& gid) {
  return gid.size() == 39 && gid.rfind("0000:0000:0000:0000:0000:ffff:", 0) == 0;
}

Result<Gid> ChooseGid(const PortInfo& port, const GidRule& rule) {
  for (const Gid& g : port.gids) {
    if (g.type == GidType::kRoceV2 && IsIpv4Mapped(g.value) &&
        (rule.netdev.empty() || g.netdev == rule.netdev))
      return g;
  }
  if (rule.index) {
    for (const Gid& g : port.gids) {
      if (g.index == *rule.index) return g;
    }
  }
  std::string seen;
  for (const Gid& g : port.gids) {
    seen += (seen.empty() ? "" : "; ") + std::to_string(g.index) + ": " + g.value + " (" +
            (g.type == GidType::kRoceV2   ? "RoCE v2"
             : g.type == GidType::kRoceV1 ? "RoCE v1"
                                          : "IB") +
            (g.netdev.empty() ? "" : ", " + g.netdev) + ")";
  }
  std::string want = "no RoCE v2 IPv4-mapped GID";
  if (!rule.netdev.empty()) want += " on " + rule.netdev;
  if (rule.index) want += " and no GID at the configured index " + std::to_string(*rule.index);
  return Status(Code::kNotFound, want + " on port " + std::to_string(port.num) + " (it has " +
                                     (seen.empty() ? std::string("no GIDs") : seen) +
                                     "); give the interface an IPv4 address or set the GID index");
}

Result<uint32_t> NegotiateMtu(uint32_t local_bytes, uint32_t remote_bytes) {
  if (MtuCode(local_bytes) == 0)
    return Status(Code::kInvalid, "local MTU " + std::to_string(local_bytes) + " is not an IB MTU");
  if (MtuCode(remote_bytes) == 0)
    return Status(Code::kInvalid,
                  "peer's MTU " + std::to_string(remote_bytes) + " is not an IB MTU");
  return std::min(local_bytes, remote_bytes);
}

std::string DetectProfile(const DeviceInfo& device) {
  auto starts = [](const std::string& s, const char* p) { return s.rfind(p, 0) == 0; };
  if (device.transport == kTransportAppleThunderbolt || starts(device.name, "rdma_en") ||
      starts(device.driver, "apple") || starts(device.name, "apple") ||
      starts(device.name, "tb5") || starts(device.name, "thunderbolt"))
    return kProfileAppleTb5;
  if (starts(device.driver, "mcdma") || starts(device.name, "mcdma") ||
      starts(device.name, "mcrdma"))
    return kProfileMcdmaCx5;
  return kProfileLinuxRc;
}

Result<Caps> ProfileCaps(const std::string& profile, const DeviceInfo& device) {
  const Limits* limits = FindVerbsProfile(profile);
  if (limits == nullptr) {
    return Status(Code::kInvalid, "unknown device profile '" + profile +
                                      "' (known: linux-rc, mcdma-cx5, apple-tb5)");
  }
  // What the device itself allows, capped at what the transport ever uses
  // (linux-rc's row): linux-rc is exactly this.
  const Limits& ceiling = kVerbsProfiles[0];
  Caps dev = ToCaps(ceiling, "verbs");
  dev.max_outstanding = std::min<uint32_t>(
      device.max_qp_wr == 0 ? ceiling.max_outstanding : device.max_qp_wr, ceiling.max_outstanding);
  dev.max_outstanding_reads =
      std::min<uint32_t>(device.max_qp_rd_atom, ceiling.max_outstanding_reads);
  dev.max_registration_bytes = std::min<uint64_t>(
      device.max_mr_size == 0 ? ceiling.max_registration_bytes : device.max_mr_size,
      ceiling.max_registration_bytes);
  dev.max_registrations = device.max_mr;
  dev.max_queue_pairs = device.max_qp;
  // A profile forced onto a device gets the stricter of both for each limit
  // (inline sizes are the profile's: the device reports none).
  Caps p = ToCaps(*limits, "verbs");
  p.one_sided = p.one_sided && dev.one_sided;
  p.max_outstanding = std::min(p.max_outstanding, dev.max_outstanding);
  p.max_outstanding_reads = std::min(p.max_outstanding_reads, dev.max_outstanding_reads);
  p.max_read_bytes = std::min(p.max_read_bytes, dev.max_read_bytes);
  p.max_transfer_bytes = std::min(p.max_transfer_bytes, dev.max_transfer_bytes);
  p.max_registration_bytes = std::min(p.max_registration_bytes, dev.max_registration_bytes);
  // Counts where 0 means "no limit": the nonzero one, or the smaller.
  auto stricter_count = [](uint32_t profile, uint32_t device) {
    if (device == 0) return profile;
    return profile == 0 ? device : std::min(profile, device);
  };
  p.max_registrations = stricter_count(p.max_registrations, dev.max_registrations);
  p.max_queue_pairs = stricter_count(p.max_queue_pairs, dev.max_queue_pairs);
  return p;
}

QpType QpTypeFor(const Caps& caps) {
  return !caps.one_sided && caps.profile == kProfileAppleTb5 ? QpType::kUc : QpType::kRc;
}

const char* QpStateName(QpState s) {
  switch (s) {
    case QpState::kReset:
      return "RESET";
    case QpState::kInit:
      return "INIT";
    case QpState::kRtr:
      return "RTR";
    case QpState::kRts:
      return "RTS";
    case QpState::kError:
      return "ERROR";
  }
  return "?";
}

Status CheckQpTransition(QpState from, QpState to) {
  bool ok = to == QpState::kError || to == QpState::kReset ||
            (from == QpState::kReset && to == QpState::kInit) ||
            (from == QpState::kInit && to == QpState::kRtr) ||
            (from == QpState::kRtr && to == QpState::kRts);
  if (ok) return Status::Ok();
  return Status(Code::kInvalid, std::string("QP transition ") + QpStateName(from) + " -> " +
                                    QpStateName(to) +
                                    " is not allowed (RESET -> INIT -> RTR -> RTS; any -> ERROR "
                                    "or RESET)");
}

}  // namespace mcdma::driver::verbs
