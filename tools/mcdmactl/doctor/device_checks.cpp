// The RDMA device checks of `mcdmactl doctor`: device, port state, GID and
// profile, judged with the verbs transport's own model (verbs_model.hpp) so
// doctor and the daemon decide alike. The verdicts are the same on every
// host; on macOS the fixes name the mcrdmaN / rdma_enN devices and macOS
// commands (kmutil, rdma_ctl, ifconfig, ipconfig), never sysfs, ip(8) or
// rdma(8), which a Mac does not have.
#include <algorithm>
#include <charconv>
#include <cstdio>

#include "doctor/checks.hpp"
#include "doctor/darwin_text.hpp"
#include "render.hpp"

namespace mcdma::tools::doctor {
namespace {

namespace verbs = driver::verbs;
using text::Join;

std::vector<std::string> DeviceNames(const DevicesInput& devices) {
  std::vector<std::string> names;
  names.reserve(devices.devices.size());
  for (const auto& d : devices.devices) names.push_back(d.name);
  return names;
}

const char* StateName(verbs::PortState state) {
  switch (state) {
    case verbs::PortState::kDown:
      return "DOWN";
    case verbs::PortState::kInit:
      return "INIT";
    case verbs::PortState::kArmed:
      return "ARMED";
    case verbs::PortState::kActive:
      return "ACTIVE";
    case verbs::PortState::kUnknown:
      break;
  }
  return "UNKNOWN";
}

const char* GidTypeName(verbs::GidType type) {
  return type == verbs::GidType::kRoceV2   ? "RoCE v2"
         : type == verbs::GidType::kRoceV1 ? "RoCE v1"
                                           : "IB";
}

const verbs::PortInfo* FindPort(const verbs::DeviceInfo& device, uint32_t num) {
  for (const auto& p : device.ports) {
    if (p.num == num) return &p;
  }
  return nullptr;
}

// The network interface a port is on, as its GIDs say (the configured
// interface when one of them is on it); empty for InfiniBand.
std::string PortNetdev(const verbs::PortInfo& port, const std::string& configured) {
  std::string first;
  for (const auto& g : port.gids) {
    if (!configured.empty() && g.netdev == configured) return configured;
    if (first.empty()) first = g.netdev;
  }
  return first;
}

// "0000:...:ffff:0a00:0101" -> "10.0.1.1"; "" when not IPv4-mapped.
std::string MappedIpv4(const std::string& gid) {
  if (!verbs::IsIpv4Mapped(gid)) return "";
  // The last two groups: characters 30..33 and 35..38.
  unsigned a = 0;
  unsigned b = 0;
  const char* g = gid.c_str();
  if (gid.size() < 39 || std::from_chars(g + 30, g + 34, a, 16).ptr != g + 34 ||
      std::from_chars(g + 35, g + 39, b, 16).ptr != g + 39)
    return "";
  return std::to_string(a >> 8) + "." + std::to_string(a & 0xff) + "." + std::to_string(b >> 8) +
         "." + std::to_string(b & 0xff);
}

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// The chosen device and its configured port, or why a port-level check skips.
struct PortPick {
  const verbs::DeviceInfo* device = nullptr;
  const verbs::PortInfo* port = nullptr;
  std::string skip_reason;
};

PortPick PickPort(const DoctorInputs& in) {
  PortPick pick;
  pick.device = ChooseDevice(in.devices, in.config.options);
  if (pick.device == nullptr) {
    pick.skip_reason = in.devices.devices.empty() ? "no RDMA device" : "verbs.device not found";
    return pick;
  }
  if (in.devices.describe_errors.count(pick.device->name) != 0) {
    pick.skip_reason = "cannot query " + pick.device->name;
    return pick;
  }
  pick.port = FindPort(*pick.device, in.config.options.verbs_port);
  if (pick.port == nullptr) {
    pick.skip_reason =
        pick.device->name + " has no port " + std::to_string(in.config.options.verbs_port);
  }
  return pick;
}

}  // namespace

const verbs::DeviceInfo* ChooseDevice(const DevicesInput& devices, const daemon::Options& options) {
  const auto& list = devices.devices;
  if (!options.verbs_device.empty()) {
    auto it = std::find_if(list.begin(), list.end(),
                           [&](const auto& d) { return d.name == options.verbs_device; });
    return it == list.end() ? nullptr : &*it;
  }
  for (const auto& d : list) {
    const verbs::PortInfo* p = FindPort(d, options.verbs_port);
    if (p != nullptr && p->state == verbs::PortState::kActive) return &d;
  }
  return list.empty() ? nullptr : &list.front();
}

CheckResult CheckRdmaDevice(const DoctorInputs& in) {
  const auto& o = in.config.options;
  const auto& dev = in.devices;
  if (dev.devices.empty()) {
    if (!dev.status.ok() && dev.source != "libibverbs") {
      return Judge("rdma_device", Verdict::kFail, "cannot read the " + dev.source,
                   dev.status.ToString(),
                   "fix the dump file, or unset MCDMA_DOCTOR_DEVICE_DUMP to ask libibverbs");
    }
    const bool all_tcp =
        !o.peers.empty() && std::all_of(o.peers.begin(), o.peers.end(),
                                        [](const auto& p) { return p.transport == "tcp"; });
    const std::string seen =
        dev.status.ok() ? dev.source + " lists none" : dev.source + ": " + dev.status.message();
    if (all_tcp) {
      return Judge("rdma_device", Verdict::kSkip, "no RDMA device; every peer uses tcp",
                   "no RDMA device (" + seen + "); every configured peer has transport \"tcp\"");
    }
    std::vector<std::string> verbs_peers;
    for (const auto& p : o.peers) {
      if (p.transport == "verbs") verbs_peers.push_back(p.name);
    }
    std::string detail = "no RDMA device on this host (" + seen + "): links will fall back to tcp";
    if (!verbs_peers.empty()) {
      detail += "; links with transport \"verbs\" (" + Join(verbs_peers) + ") cannot come up";
    }
    if (HostIsMac(in)) {
      return Judge("rdma_device", Verdict::kFail, "no RDMA device", detail,
                   std::string("for the ConnectX-5, load its kext (sudo kmutil load -b ") +
                       kCx5BundleId +
                       "; see cx5_kext); for Thunderbolt between Macs, enable RDMA over "
                       "Thunderbolt (see thunderbolt_rdma); `ibv_devices` should then list "
                       "mcrdma0 or rdma_en devices");
    }
    const std::string netdev = o.verbs_interface.empty() ? "<if>" : o.verbs_interface;
    return Judge("rdma_device", Verdict::kFail, "no RDMA device", detail,
                 "load a provider: modprobe rdma_rxe && rdma link add rxe0 type rxe netdev " +
                     netdev +
                     " for Soft-RoCE, or install the NIC's driver; `ibv_devices` should list "
                     "it");
  }
  const auto names = DeviceNames(dev);
  const verbs::DeviceInfo* chosen = ChooseDevice(dev, o);
  if (chosen == nullptr) {
    return Judge("rdma_device", Verdict::kFail, "verbs.device \"" + o.verbs_device + "\" not found",
                 dev.source + " lists " + Join(names) + "; the daemon would have no device",
                 "set verbs.device to one of " + Join(names) +
                     ", or leave it empty to use the first with an ACTIVE port");
  }
  const std::string why =
      o.verbs_device.empty()
          ? "the first with port " + std::to_string(o.verbs_port) + " ACTIVE, or else the first"
          : "verbs.device";
  return Judge("rdma_device", Verdict::kOk,
               chosen->name + (chosen->driver.empty() ? "" : " (driver " + chosen->driver + ")"),
               dev.source + " lists " + Join(names) + "; the daemon uses " + chosen->name + " (" +
                   why + ")");
}

CheckResult CheckPortActive(const DoctorInputs& in) {
  const auto& o = in.config.options;
  PortPick pick = PickPort(in);
  if (pick.device != nullptr && pick.port == nullptr) {
    auto err = in.devices.describe_errors.find(pick.device->name);
    if (err != in.devices.describe_errors.end()) {
      const std::string& name = pick.device->name;
      std::string check = "check that this user may open /dev/infiniband/uverbs* (rw), that " +
                          name + "'s provider is loaded";
      if (HostIsMac(in)) {
        const std::string provider = StartsWith(name, kCx5DevicePrefix)
                                         ? std::string(kCx5BundleId) + " is loaded (see cx5_kext)"
                                     : StartsWith(name, kThunderboltDevicePrefix)
                                         ? "RDMA over Thunderbolt is enabled (see thunderbolt_rdma)"
                                         : name + "'s provider is loaded";
        check =
            "check that doctor runs as root (as the daemon does under launchd), that " + provider;
      }
      return Judge(
          "port_active", Verdict::kFail, "cannot query " + name, err->second.ToString(),
          check + " and that it has port " + std::to_string(o.verbs_port) + " (verbs.port)");
    }
    std::vector<std::string> nums;
    nums.reserve(pick.device->ports.size());
    for (const auto& p : pick.device->ports) nums.push_back(std::to_string(p.num));
    return Judge("port_active", Verdict::kFail, pick.skip_reason,
                 pick.device->name + " has port(s) " + (nums.empty() ? "none" : Join(nums)),
                 nums.empty() ? "check " + pick.device->name + "'s provider"
                              : "set verbs.port to one of " + Join(nums));
  }
  if (pick.port == nullptr) return Judge("port_active", Verdict::kSkip, pick.skip_reason);
  const auto& port = *pick.port;
  std::string netdev = PortNetdev(port, o.verbs_interface);
  if (netdev.empty() && HostIsMac(in)) netdev = MacDeviceInterface(pick.device->name);
  const std::string where = pick.device->name + " port " + std::to_string(port.num);
  const std::string on = netdev.empty() ? "" : " on " + netdev;
  if (port.state == verbs::PortState::kActive) {
    return Judge("port_active", Verdict::kOk, where + " ACTIVE" + on,
                 (port.link_layer.empty() ? "" : port.link_layer + ", ") + "active MTU " +
                     std::to_string(port.active_mtu) + " bytes");
  }
  std::string fix;
  if (HostIsMac(in)) {
    const std::string iface = netdev.empty() ? "<if>" : netdev;
    fix = StartsWith(pick.device->name, kThunderboltDevicePrefix)
              ? "check the Thunderbolt cable on " + iface +
                    " and that the Mac at its other end has RDMA over Thunderbolt enabled too"
              : "sudo ifconfig " + iface + " up; check the cable and the switch port " + iface +
                    " is plugged into (`ifconfig " + iface + "` should say status: active)";
  } else {
    fix = netdev.empty() ? "bring the port's interface up (ip link set <if> up)"
                         : "ip link set " + netdev + " up";
    fix += "; check the cable";
  }
  // A Mac has no InfiniBand, whatever link layer a provider reports.
  if (port.link_layer == "InfiniBand" && !HostIsMac(in)) {
    fix += "; an InfiniBand port that stays INIT needs a subnet manager (opensm)";
  }
  return Judge("port_active", Verdict::kFail, where + " is " + StateName(port.state) + on,
               "port state " + std::string(StateName(port.state)) + ", not ACTIVE: no link can " +
                   "use " + pick.device->name + " until it is",
               fix);
}

CheckResult CheckGid(const DoctorInputs& in) {
  const auto& o = in.config.options;
  PortPick pick = PickPort(in);
  if (pick.port == nullptr) return Judge("gid", Verdict::kSkip, pick.skip_reason);
  verbs::GidRule rule;
  rule.netdev = o.verbs_interface;
  if (o.verbs_gid_index >= 0) rule.index = static_cast<uint32_t>(o.verbs_gid_index);
  auto gid = verbs::ChooseGid(*pick.port, rule);
  if (gid.ok()) {
    const std::string ipv4 = MappedIpv4(gid->value);
    const bool by_rule = gid->type == verbs::GidType::kRoceV2 && !ipv4.empty();
    return Judge("gid", Verdict::kOk,
                 "index " + std::to_string(gid->index) + " " + gid->value + " (" +
                     GidTypeName(gid->type) + (gid->netdev.empty() ? "" : ", " + gid->netdev) + ")",
                 by_rule
                     ? "the RoCE v2 IPv4-mapped GID of " + ipv4 +
                           (o.verbs_interface.empty() ? " (any interface)"
                                                      : " on verbs.interface " + o.verbs_interface)
                     : "the configured verbs.gid_index (no RoCE v2 IPv4-mapped GID matched)");
  }
  std::vector<std::string> netdevs;
  for (const auto& g : pick.port->gids) {
    if (!g.netdev.empty() && std::find(netdevs.begin(), netdevs.end(), g.netdev) == netdevs.end())
      netdevs.push_back(g.netdev);
  }
  std::string fix;
  const bool on_configured =
      std::find(netdevs.begin(), netdevs.end(), o.verbs_interface) != netdevs.end();
  if (!o.verbs_interface.empty() && !on_configured && !netdevs.empty()) {
    fix = "set verbs.interface to the interface " + pick.device->name + " is on (" + Join(netdevs) +
          "), or set verbs.device to the device on " + o.verbs_interface;
  } else if (HostIsMac(in)) {
    const std::string guess = MacDeviceInterface(pick.device->name);
    const std::string netdev = !o.verbs_interface.empty() ? o.verbs_interface
                               : !netdevs.empty()         ? netdevs.front()
                               : !guess.empty()           ? guess
                                                          : "<if>";
    // The mcrdma interfaces carry RDMA only (peer_address): the address is
    // one of the RDMA network, not the management network's.
    fix = "give " + netdev + " an IPv4 address on the RDMA network (e.g. sudo ipconfig set " +
          netdev +
          " MANUAL 192.168.50.2 255.255.255.0, another address on each host); its RoCE v2 GID "
          "appears with it";
  } else {
    const std::string netdev = !o.verbs_interface.empty() ? o.verbs_interface
                               : netdevs.empty()          ? "<if>"
                                                          : netdevs.front();
    fix = "give " + netdev + " an IPv4 address (ip addr add ADDR/LEN dev " + netdev +
          "), or set verbs.interface to the interface peers reach this host on";
  }
  if (!pick.port->gids.empty()) fix += ", or set verbs.gid_index to an index listed above";
  return Judge("gid", Verdict::kFail,
               "no usable GID on " + pick.device->name + " port " + std::to_string(pick.port->num),
               gid.status().message(), fix);
}

CheckResult CheckProfile(const DoctorInputs& in) {
  const auto& o = in.config.options;
  PortPick pick = PickPort(in);
  if (pick.port == nullptr) return Judge("profile", Verdict::kSkip, pick.skip_reason);
  const std::string detected = verbs::DetectProfile(*pick.device);
  const std::string in_force = o.verbs_profile.empty() ? detected : o.verbs_profile;
  auto caps = verbs::ProfileCaps(in_force, *pick.device);
  if (!caps.ok()) {
    return Judge("profile", Verdict::kFail, "unknown profile " + in_force, caps.status().message(),
                 "set verbs.profile to linux-rc, mcdma-cx5 or apple-tb5, or leave it empty");
  }
  std::string summary = in_force + ": max outstanding " + std::to_string(caps->max_outstanding) +
                        ", reads " + std::to_string(caps->max_outstanding_reads) +
                        ", registration up to " + FormatBytes(caps->max_registration_bytes);
  if (caps->max_registrations != 0) {
    summary += ", at most " + std::to_string(caps->max_registrations) + " registrations";
  }
  std::string detail = "detected " + detected + " for " + pick.device->name;
  detail += o.verbs_profile.empty() ? "; verbs.profile is not set"
            : o.verbs_profile == detected
                ? "; verbs.profile says the same"
                : "; verbs.profile = " + o.verbs_profile +
                      " overrides it and each limit is the stricter of both";
  if (!caps->one_sided) detail += "; no one-sided READ/WRITE (SEND/RECV only)";
  return Judge("profile", Verdict::kOk, summary, detail);
}

}  // namespace mcdma::tools::doctor
