// The checks of doctor_darwin.hpp: what the macOS commands said (parsed by
// doctor_darwin.cpp), judged against the devices and configuration in
// DarwinContext. A command that could not be run, or whose output could not
// be parsed, is a warn that says so: doctor cannot tell, so it does not fail.
#include <arpa/inet.h>

#include <algorithm>

#include "doctor/darwin.hpp"
#include "doctor/darwin_text.hpp"
#include "render.hpp"

namespace mcdma::tools::doctor {
namespace {

using text::Join;
using text::Lower;
using text::StartsWith;

std::vector<std::string> WithPrefix(const std::vector<std::string>& names, const char* prefix) {
  std::vector<std::string> out;
  for (const auto& n : names) {
    if (StartsWith(n, prefix)) out.push_back(n);
  }
  return out;
}

// How a command that ran ended, when that matters for reading its output:
// "; it exited 1 saying \"...\"", or "" for exit 0.
std::string ExitNote(const CommandOutput& c) {
  if (c.exit_code == 0) return "";
  return "; it exited " + std::to_string(c.exit_code) +
         (text::Trim(c.err).empty() ? "" : " saying " + text::Quoted(c.err));
}

std::string CannotRun(const CommandOutput& c) { return "cannot run `" + c.command + "`"; }

// link-local addresses are on every interface, so being on an mcrdma
// interface's link-local subnet says nothing about where a peer is.
bool LinkLocal(const std::string& ip) {
  unsigned char b[16] = {};
  std::string bare = ip.substr(0, ip.find('%'));
  if (inet_pton(AF_INET, bare.c_str(), b) == 1) return b[0] == 169 && b[1] == 254;
  if (inet_pton(AF_INET6, bare.c_str(), b) == 1) return b[0] == 0xfe && (b[1] & 0xc0) == 0x80;
  return false;
}

bool IpLiteral(const std::string& host) {
  unsigned char b[16] = {};
  std::string bare = host.substr(0, host.find('%'));
  return inet_pton(AF_INET, bare.c_str(), b) == 1 || inet_pton(AF_INET6, bare.c_str(), b) == 1;
}

constexpr const char* kThunderboltFix =
    "boot into macOS Recovery, open Terminal (Utilities > Terminal), run `rdma_ctl enable`, and "
    "reboot; `ibv_devices` then lists an rdma_en device per Thunderbolt port";

}  // namespace

CheckResult CheckThunderboltRdma(const DarwinInputs& in, const DarwinContext& ctx) {
  constexpr const char* kId = "thunderbolt_rdma";
  const auto tb = WithPrefix(ctx.devices, kThunderboltDevicePrefix);
  const bool cx5_used = StartsWith(ctx.chosen_device, kCx5DevicePrefix);
  const std::string not_needed =
      "not needed: the daemon uses " + ctx.chosen_device + " (ConnectX-5)";
  const CommandOutput& c = in.rdma_ctl;
  if (!c.status.ok()) {
    if (cx5_used) return Judge(kId, Verdict::kSkip, CannotRun(c) + "; " + not_needed);
    if (!tb.empty()) {
      return Judge(
          kId, Verdict::kOk, "RDMA over Thunderbolt enabled (" + Join(tb) + ")",
          CannotRun(c) + " (" + c.status.message() + "), but libibverbs lists " + Join(tb));
    }
    return Judge(
        kId, Verdict::kWarn, CannotRun(c),
        c.status.message() +
            "; RDMA over Thunderbolt needs macOS 26.2 or later on a Mac with Thunderbolt 5",
        "run `rdma_ctl status` in Terminal; without rdma_ctl, update macOS to use RDMA "
        "over Thunderbolt, or use the ConnectX-5 (see cx5_kext)");
  }
  auto enabled = ParseRdmaCtlStatus(c.out);
  if (!enabled.ok()) {
    return Judge(kId, Verdict::kWarn, "could not parse `" + c.command + "`",
                 enabled.status().message() + ExitNote(c),
                 "run `rdma_ctl status` in Terminal: it should say enabled or disabled; if it "
                 "says disabled: " +
                     std::string(kThunderboltFix));
  }
  if (*enabled) {
    return Judge(kId, Verdict::kOk, "RDMA over Thunderbolt enabled",
                 tb.empty() ? "rdma_ctl status says enabled, but libibverbs lists no rdma_en "
                              "device (not rebooted since `rdma_ctl enable`?)"
                            : "rdma_ctl status says enabled; libibverbs lists " + Join(tb));
  }
  if (cx5_used) return Judge(kId, Verdict::kSkip, "RDMA over Thunderbolt disabled; " + not_needed);
  if (ctx.all_peers_tcp) {
    return Judge(kId, Verdict::kSkip, "RDMA over Thunderbolt disabled; every peer uses tcp");
  }
  return Judge(kId, Verdict::kFail, "RDMA over Thunderbolt is disabled",
               "rdma_ctl status says disabled: macOS has no rdma_en devices, so links to other "
               "Macs over Thunderbolt cannot use RDMA and fall back to tcp",
               kThunderboltFix);
}

CheckResult CheckCx5Kext(const DarwinInputs& in, const DarwinContext& ctx) {
  constexpr const char* kId = "cx5_kext";
  const auto cx5 = WithPrefix(ctx.devices, kCx5DevicePrefix);
  const bool tb_used = StartsWith(ctx.chosen_device, kThunderboltDevicePrefix);
  const std::string not_needed =
      "not needed: the daemon uses " + ctx.chosen_device + " (Thunderbolt)";
  const std::string id = kCx5BundleId;
  const CommandOutput& c = in.kmutil;
  const std::string look = "run `kmutil showloaded --list-only | grep " + id + "` in Terminal";
  if (!c.status.ok()) {
    if (tb_used) return Judge(kId, Verdict::kSkip, CannotRun(c) + "; " + not_needed);
    if (!cx5.empty()) {
      return Judge(
          kId, Verdict::kOk, id + " loaded (" + Join(cx5) + ")",
          CannotRun(c) + " (" + c.status.message() + "), but libibverbs lists " + Join(cx5));
    }
    return Judge(kId, Verdict::kWarn, CannotRun(c), c.status.message(), look);
  }
  auto kexts = ParseKmutilShowloaded(c.out);
  if (!kexts.ok()) {
    return Judge(kId, Verdict::kWarn, "could not parse `" + c.command + "`",
                 kexts.status().message() + ExitNote(c), look);
  }
  auto it = std::find_if(kexts->begin(), kexts->end(),
                         [&](const LoadedKext& k) { return k.bundle_id == id; });
  if (it != kexts->end()) {
    return Judge(
        kId, Verdict::kOk,
        id + (it->version.empty() ? " loaded (no version listed)" : " " + it->version + " loaded"),
        cx5.empty() ? "but libibverbs lists no mcrdma device, so no ConnectX-5 is in use "
                      "(is it attached?)"
                    : "its RDMA devices: " + Join(cx5));
  }
  if (tb_used) return Judge(kId, Verdict::kSkip, id + " not loaded; " + not_needed);
  if (ctx.all_peers_tcp) {
    return Judge(kId, Verdict::kSkip, id + " not loaded; every peer uses tcp");
  }
  return Judge(kId, Verdict::kFail, id + " is not loaded",
               "kmutil lists " + std::to_string(kexts->size()) + " loaded extensions, not " + id +
                   ": without it the ConnectX-5 has no mcrdma device and links cannot use RDMA "
                   "over it",
               "sudo kmutil load -b " + id +
                   "; if macOS says the extension was never approved, approve it in System "
                   "Settings > Privacy & Security, reboot, and load it again");
}

CheckResult CheckThunderboltBridge(const DarwinInputs& in, const DarwinContext& ctx) {
  constexpr const char* kId = "thunderbolt_bridge";
  const auto tb = WithPrefix(ctx.devices, kThunderboltDevicePrefix);
  if (tb.empty()) return Judge(kId, Verdict::kSkip, "no Thunderbolt RDMA device (rdma_en*)");
  const std::string off =
      std::string("sudo networksetup -setnetworkserviceenabled \"") + kThunderboltBridge + "\" off";
  const CommandOutput& c = in.networksetup;
  const std::string look =
      "run `networksetup -listallnetworkservices` in Terminal; \"Thunderbolt Bridge\" must be "
      "disabled (" +
      off + ")";
  if (!c.status.ok()) return Judge(kId, Verdict::kWarn, CannotRun(c), c.status.message(), look);
  auto services = ParseNetworkServices(c.out);
  if (!services.ok()) {
    return Judge(kId, Verdict::kWarn, "could not parse `" + c.command + "`",
                 services.status().message() + ExitNote(c), look);
  }
  // "Thunderbolt Bridge", and any numbered copy ("Thunderbolt Bridge 2").
  const std::string bridge = Lower(kThunderboltBridge);
  std::vector<std::string> on;
  bool listed = false;
  for (const auto& s : *services) {
    if (!StartsWith(Lower(s.name), bridge)) continue;
    listed = true;
    if (s.enabled) on.push_back(s.name);
  }
  if (on.empty()) {
    return Judge(
        kId, Verdict::kOk,
        listed ? "\"Thunderbolt Bridge\" is disabled" : "no \"Thunderbolt Bridge\" service",
        "RDMA over Thunderbolt on " + Join(tb) + "; networksetup lists " +
            std::to_string(services->size()) + " network services");
  }
  std::vector<std::string> quoted;
  std::vector<std::string> fixes;
  for (const auto& name : on) {
    quoted.push_back("\"" + name + "\"");
    fixes.push_back("sudo networksetup -setnetworkserviceenabled \"" + name + "\" off");
  }
  return Judge(kId, Verdict::kFail,
               Join(quoted) + (on.size() == 1 ? " is" : " are") +
                   " enabled while RDMA over Thunderbolt uses " + Join(tb),
               "the bridge joins the Thunderbolt ports RDMA over Thunderbolt uses into one "
               "Ethernet bridge: with Macs cabled to each other it forwards broadcasts around the "
               "cables, and the traffic storms and loops that follow stall the links",
               Join(fixes, "; "));
}

CheckResult CheckLaunchdMemlock(const DarwinInputs& in, const DarwinContext& ctx) {
  constexpr const char* kId = "memlock";
  if (ctx.chosen_device.empty()) {
    return Judge(kId, Verdict::kSkip, "no RDMA device (tcp links pin no memory)");
  }
  // The plist the install step makes from launchd/org.mcdma.rpcd.plist.in
  // sets both limits; a hand-written or older one may not.
  const std::string fix =
      "set MemoryLock under both SoftResourceLimits and HardResourceLimits in "
      "/Library/LaunchDaemons/org.mcdma.rpcd.plist (launchd/org.mcdma.rpcd.plist.in sets both to "
      "unlimited) and reload it (sudo launchctl bootout system/org.mcdma.rpcd, then sudo "
      "launchctl bootstrap system /Library/LaunchDaemons/org.mcdma.rpcd.plist), or raise "
      "launchd's default: sudo launchctl limit memlock unlimited unlimited";
  const CommandOutput& c = in.memlock;
  if (!c.status.ok()) {
    return Judge(kId, Verdict::kWarn, CannotRun(c), c.status.message(),
                 "run `launchctl limit memlock` in Terminal; if the limit is below " +
                     FormatBytes(ctx.memlock_needed) + ": " + fix);
  }
  auto limit = ParseLaunchctlLimit(c.out, "memlock");
  if (!limit.ok()) {
    return Judge(kId, Verdict::kWarn, "could not parse `" + c.command + "`",
                 limit.status().message() + ExitNote(c),
                 "run `launchctl limit memlock` in Terminal; if the limit is below " +
                     FormatBytes(ctx.memlock_needed) + ": " + fix);
  }
  const std::string source =
      "launchd's limit for the daemons it starts, unless their plist sets MemoryLock "
      "(SoftResourceLimits, HardResourceLimits)";
  const std::string detail = ctx.memlock_formula + "; " + source;
  if (limit->soft_unlimited) {
    return Judge(kId, Verdict::kOk, "launchd memlock unlimited", detail);
  }
  const std::string have = FormatBytes(limit->soft);
  if (limit->soft >= ctx.memlock_needed) {
    return Judge(kId, Verdict::kOk,
                 "launchd memlock " + have + " >= " + FormatBytes(ctx.memlock_needed), detail);
  }
  return Judge(kId, Verdict::kFail,
               "launchd memlock " + have + " < " + FormatBytes(ctx.memlock_needed) + " needed",
               "memory registration pins the link buffers; the daemon " + detail, fix);
}

CheckResult CheckPeerAddresses(const DarwinInputs& in, const DarwinContext& ctx) {
  constexpr const char* kId = "peer_address";
  if (ctx.peers.empty()) return Judge(kId, Verdict::kSkip, "no peers configured");
  const auto& ifs = in.interfaces;
  if (!ifs.status.ok()) {
    return Judge(kId, Verdict::kWarn, "cannot list this host's interface addresses",
                 ifs.status.ToString(),
                 "run `ifconfig` and check that no [[peer]] address is in the subnet of an "
                 "mcrdma interface");
  }
  std::vector<const InterfaceAddress*> rdma;
  std::vector<std::string> rdma_text;
  for (const auto& a : ifs.addresses) {
    if (!StartsWith(a.name, kCx5DevicePrefix) || LinkLocal(a.address)) continue;
    rdma.push_back(&a);
    rdma_text.push_back(a.name + " " + a.address +
                        (a.netmask.empty() ? "" : " netmask " + a.netmask));
  }
  if (rdma.empty()) return Judge(kId, Verdict::kSkip, "no mcrdma interface has an address");
  std::vector<std::string> bad;  // "spark-2 192.168.50.3 (mcrdma0)"
  std::vector<std::string> bad_names;
  std::vector<std::string> bad_ifs;
  std::vector<std::string> seen;
  std::vector<std::string> names;  // not IP literals: not resolved, not judged
  for (const auto& p : ctx.peers) {
    if (!IpLiteral(p.host)) {
      names.push_back(p.name + " (" + p.host + ")");
      continue;
    }
    seen.push_back(p.name + " " + p.host);
    if (LinkLocal(p.host)) continue;
    auto on = std::find_if(rdma.begin(), rdma.end(),
                           [&](const InterfaceAddress* a) { return OnSubnet(p.host, *a); });
    if (on == rdma.end()) continue;
    bad.push_back(p.name + " " + p.host + " (" + (*on)->name + ")");
    bad_names.push_back(p.name);
    if (std::find(bad_ifs.begin(), bad_ifs.end(), (*on)->name) == bad_ifs.end())
      bad_ifs.push_back((*on)->name);
  }
  const std::string unjudged =
      names.empty() ? "" : "; not judged (host names are not resolved): " + Join(names);
  if (bad.empty()) {
    return Judge(kId, Verdict::kOk, "no peer address is on an mcrdma interface",
                 "mcrdma interfaces: " + Join(rdma_text, "; ") +
                     (seen.empty() ? "" : "; peers: " + Join(seen)) + unjudged);
  }
  const std::string summary =
      bad.size() == 1 ? "peer " + bad.front() + " is on an mcrdma interface's subnet"
                      : std::to_string(bad.size()) +
                            " peer addresses are on mcrdma interfaces' subnets: " + Join(bad);
  return Judge(kId, Verdict::kFail, summary,
               Join(bad) + " in the subnet of " + Join(rdma_text, "; ") +
                   ": mcrdma interfaces carry the ConnectX-5's RDMA, not TCP, so the peer "
                   "service and tcp links cannot reach the peer there (a verbs link still runs "
                   "over " +
                   Join(bad_ifs) + ", found through its RoCE v2 GID)" + unjudged,
               "in the [[peer]] entry of " + Join(bad_names, " and ") +
                   ", set address to the peer's address on the management network (an interface "
                   "other than " +
                   Join(bad_ifs, " or ") + ")");
}

}  // namespace mcdma::tools::doctor
