// The checks of `mcdmactl doctor` that concern the fabric and the running
// daemon: fabric key, daemon, fabric store (and the members it reaches
// directly), peers (one per link), path MTU (one per verbs link). Fixes
// name systemd and ip(8) on Linux, launchd (the daemon runs as root there,
// launchd/org.mcdma.rpcd.plist.in) and ifconfig on macOS.
#include <cstdio>

#include "doctor/checks.hpp"
#include "platform/names.hpp"
#include "platform/paths.hpp"
#include "render.hpp"

namespace mcdma::tools::doctor {
namespace {

std::string RestartCommand(const DoctorInputs& in) {
  return HostIsMac(in) ? "sudo launchctl kickstart -k system/org.mcdma.rpcd"
                       : "systemctl restart mcdma-rpcd";
}

std::string Micros(double us) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f us", us);
  return buf;
}

// What to do about a key file LoadFabricKey refused (its message already
// says it; this is the command alone, for the `fix:` line).
std::string FabricKeyFix(const Status& status, const std::string& path, bool mac) {
  const Reason why = status.reason();
  if (status.code() == Code::kNotFound) {
    return "mcdmactl fabric-key new " + path + ", then copy that file to every host of the fabric";
  }
  if (why == Reason::kKeyFileMode) return "chmod 600 " + path;
  if (why == Reason::kKeyFileOwner && mac) {
    return "chown the file to the user the daemon runs as (root under launchd: sudo chown root " +
           path + "), and run doctor as that user (sudo mcdmactl doctor)";
  }
  if (why == Reason::kKeyFileOwner) {
    return "chown the file to the user the daemon runs as (chown mcdma " + path +
           " for the systemd unit), and run doctor as that user (sudo -u mcdma mcdmactl doctor)";
  }
  if (why == Reason::kAccessDenied && mac) {
    return "run doctor as the user the daemon runs as (root under launchd: sudo mcdmactl doctor); "
           "that user must own " +
           path;
  }
  if (why == Reason::kAccessDenied) {
    return "run doctor as the user the daemon runs as (sudo -u mcdma mcdmactl doctor); that user "
           "must own " +
           path;
  }
  if (why == Reason::kKeyFileLink) return "point fabric_key at the key file itself";
  return "copy the fabric's key file from another host, or write a new one with `mcdmactl "
         "fabric-key new --force " +
         path + "` and copy it to every host";
}

std::string ConfigFlag(const DoctorInputs& in) {
  return in.config.path.empty() ? platform::DefaultConfigPath() : in.config.path;
}

// "host:port" of a link's address, port defaulted as the daemon does.
std::string PeerPort(const std::string& address) {
  auto hp = daemon::SplitHostPort(address, daemon::kDefaultPeerPort);
  return hp.ok() ? std::to_string(hp->second) : std::to_string(daemon::kDefaultPeerPort);
}

CheckResult LinkResult(const v1::LinkInfo& link, const v1::LinksReply& links) {
  const std::string& peer = link.peer();
  if (link.state() == "up") {
    std::string summary = peer + ": up via " + link.transport();
    if (link.rtt_avg_us() > 0) summary += ", rtt " + Micros(link.rtt_avg_us());
    std::string detail = (link.address().empty() ? "incoming" : "address " + link.address()) +
                         ", generation " + std::to_string(link.generation());
    if (!link.transport_reason().empty()) detail += ", " + link.transport_reason();
    return Judge("peers", Verdict::kOk, summary, detail);
  }
  const std::string error =
      link.last_error().empty() ? "no error recorded yet" : "last error: " + link.last_error();
  if (link.state() == "refused") {
    const Reason why = ReasonFromName(link.last_error_reason());
    std::string fix;
    if (why == Reason::kPeerIdentity) {
      fix = "make the [[peer]] name " + peer + "'s host_id (default: its hostname), or fix the " +
            "address; every host needs its own host_id";
    } else if (why == Reason::kTransportRefused) {
      fix = "set the peer's transport to \"auto\" or \"tcp\"";
    } else {
      fix = "compare fingerprints: `mcdmactl links --json` on " + peer +
            " must show fabric_key_fingerprint " + links.fabric_key_fingerprint() +
            "; if not, copy this fabric's key file to it and restart its daemon";
    }
    return Judge(
        "peers", Verdict::kFail, peer + ": refused",
        error + "; this host's fabric key fingerprint is " + links.fabric_key_fingerprint(), fix);
  }
  std::string fix;
  if (link.address().empty()) {
    fix = peer + " dialed this host and reconnects by itself; run mcdmactl doctor on " + peer;
  } else {
    fix = "is " + peer + "'s daemon running with a fabric_key (mcdmactl doctor there)? is " +
          link.address() + " its address? open TCP port " + PeerPort(link.address()) +
          " (and its data_listen port) in the firewall";
  }
  return Judge("peers", Verdict::kFail, peer + ": unreachable (" + link.state() + ")", error, fix);
}

// "host:port[,host:port...]" of a store URL, for commands that name it.
std::string StoreEndpoints(const std::string& url) {
  const size_t sep = url.find("://");
  return sep == std::string::npos ? url : url.substr(sep + 3);
}

// What the store check says of the members: "3 member(s), 1 evicted, 2
// reached directly".
std::string MembersText(const v1::FabricReply& f) {
  int members = 0;
  int evicted = 0;
  int direct = 0;
  for (const v1::FabricHostView& h : f.hosts()) {
    if (h.state() == "member") ++members;
    if (h.state() == "evicted") ++evicted;
    if (h.state() == "member" && h.reach() == "direct") ++direct;
  }
  return std::to_string(members) + " member(s), " + std::to_string(evicted) + " evicted, " +
         std::to_string(direct) + " reached directly";
}

// The store itself: a file is always ok, an etcd store by its state.
CheckResult StoreResult(const v1::FabricReply& f) {
  const std::string fabric = "fabric " + f.fabric_name() + ", host " + f.host_id();
  if (f.source() == "file") {
    return Judge("fabric_store", Verdict::kOk, "file " + f.store() + ": " + MembersText(f),
                 fabric + "; the members are the file's hosts (the same file on every host)");
  }
  const std::string store = f.source() + " " + f.store();
  if (f.store_state() == "connected") {
    return Judge("fabric_store", Verdict::kOk,
                 store + " connected: lease TTL " + std::to_string(f.lease_ttl_ms()) +
                     " ms, revision " + std::to_string(f.revision()) + ", " + MembersText(f),
                 fabric + ", listed " + std::to_string(f.relists()) + " time(s)");
  }
  const std::string endpoints = StoreEndpoints(f.store());
  const std::string error = f.store_error().empty() ? "no error recorded yet" : f.store_error();
  const std::string fix = "is etcd running (etcdctl --endpoints=" + endpoints +
                          " endpoint health) and reachable from this host at " + endpoints +
                          " (route, firewall)? the daemon retries by itself; links stay up "
                          "meanwhile";
  if (f.store_state() == "connecting") {
    return Judge("fabric_store", Verdict::kWarn, store + " connecting",
                 "the daemon has not reached the store yet: " + error,
                 "run doctor again in a few seconds; if it stays, " + fix);
  }
  return Judge(
      "fabric_store", Verdict::kFail, store + " " + f.store_state(),
      "the daemon cannot reach the store: " + error +
          ". Members and links stay as they were, but hosts that join or die are not seen, and "
          "where the others still reach the store this host's lease (" +
          std::to_string(f.lease_ttl_ms()) + " ms) runs out and they evict it",
      fix);
}

// A member this host reaches directly whose link is not up (or missing).
CheckResult MemberLinkResult(const v1::FabricHostView& h) {
  const std::string state = h.link_state().empty() ? "no link" : "link " + h.link_state();
  std::string fix;
  if (h.dial_address().empty()) {
    const std::string& host = h.host();
    fix = host + " dials this host (of a pair, the lower host id dials): run mcdmactl doctor on " +
          host + "; this host's Peer port (listen) must be open to it";
  } else {
    fix = "this host dials " + h.dial_address() + ": is " + h.host() +
          "'s daemon running with this fabric's key (mcdmactl doctor there)? is TCP port " +
          PeerPort(h.dial_address()) + " open there? mcdmactl links shows the last error";
  }
  return Judge("fabric_store", Verdict::kWarn, h.host() + ": reached directly, " + state,
               h.host() + " is a member reached directly (" + h.reach_detail() +
                   ") but its link is not up; calls to it fail until it is",
               fix);
}

}  // namespace

CheckResult CheckFabricKey(const DoctorInputs& in) {
  const std::string& path = in.config.options.fabric_key;
  if (path.empty()) {
    return Judge("fabric_key", Verdict::kSkip, "no fabric key: the peer service is off",
                 "fabric_key is not set, so the daemon links to no other host");
  }
  const FabricKeyInput& key = in.fabric_key;
  if (!key.status.ok()) {
    return Judge("fabric_key", Verdict::kFail, path + " cannot be loaded", key.status.ToString(),
                 FabricKeyFix(key.status, path, HostIsMac(in)));
  }
  const std::string summary = path + " loads (fingerprint " + key.fingerprint + ")";
  const DaemonInput& d = in.daemon;
  if (d.status.ok() && d.links_status.ok()) {
    if (!d.links.peering()) {
      return Judge("fabric_key", Verdict::kWarn, summary,
                   "but mcdma-rpcd at " + d.socket + " runs with peering off",
                   "restart it with this configuration: mcdma-rpcd --config " + ConfigFlag(in) +
                       " (" + RestartCommand(in) + ")");
    }
    if (d.links.fabric_key_fingerprint() != key.fingerprint) {
      return Judge("fabric_key", Verdict::kWarn, summary,
                   "but mcdma-rpcd at " + d.socket + " runs with fingerprint " +
                       d.links.fabric_key_fingerprint(),
                   "restart it to load " + path + " (" + RestartCommand(in) + ")");
    }
  }
  return Judge("fabric_key", Verdict::kOk, summary,
               "mode and owner pass the daemon's checks; the fingerprint must be the same on "
               "every host");
}

CheckResult CheckDaemon(const DoctorInputs& in) {
  const DaemonInput& d = in.daemon;
  if (d.status.ok()) {
    const auto& r = d.reply;
    const std::string summary = "mcdma-rpcd " + r.version() + " answers on " + d.socket;
    const std::string detail = "host " + r.host_id() + ", pid " + std::to_string(r.pid()) +
                               ", up " + FormatDuration(r.uptime_s()) + ", " +
                               std::to_string(r.sessions()) + " session(s), " + r.state();
    if (r.state() == "draining") {
      return Judge("daemon", Verdict::kWarn, summary, detail + ": it is stopping",
                   "start it again once it has exited: " + RestartCommand(in));
    }
    return Judge("daemon", Verdict::kOk, summary, detail);
  }
  const Status& s = d.status;
  std::string detail = s.code() == Code::kTimeout
                           ? "mcdma-rpcd at " + d.socket + " did not answer in time: " + s.message()
                           : "cannot reach mcdma-rpcd at " + d.socket + ": " + s.message();
  std::string fix;
  const bool denied = s.code() == Code::kPermissionDenied;
  if (HostIsMac(in) && denied) {
    fix =
        "run as root (sudo mcdmactl doctor): under launchd the daemon and its socket's "
        "directory are root's";
  } else if (HostIsMac(in) && s.code() == Code::kTimeout) {
    fix =
        "it is wedged: read its log (StandardErrorPath in "
        "/Library/LaunchDaemons/org.mcdma.rpcd.plist) and restart it: " +
        RestartCommand(in);
  } else if (HostIsMac(in)) {
    fix =
        "start it: sudo launchctl bootstrap system /Library/LaunchDaemons/org.mcdma.rpcd.plist, "
        "or run mcdma-rpcd --config " +
        ConfigFlag(in) + "; if it listens elsewhere, pass --socket PATH";
  } else if (denied) {
    fix = "join group mcdma (usermod -aG mcdma $USER, then log in again), or run as root";
  } else if (s.code() == Code::kTimeout) {
    fix = "it is wedged: read its log (journalctl -u mcdma-rpcd) and restart it";
  } else {
    fix = "start it: systemctl start mcdma-rpcd, or run mcdma-rpcd --config " + ConfigFlag(in) +
          "; if it listens elsewhere, pass --socket PATH";
  }
  return Judge("daemon", Verdict::kFail, "no answer on " + d.socket, detail, fix);
}

std::vector<CheckResult> CheckFabricStore(const DoctorInputs& in) {
  const DaemonInput& d = in.daemon;
  if (!d.status.ok()) return {Judge("fabric_store", Verdict::kSkip, "the daemon is not reachable")};
  if (!d.fabric_status.ok()) {
    return {Judge("fabric_store", Verdict::kSkip, "the daemon did not describe its fabric",
                  d.fabric_status.ToString())};
  }
  const v1::FabricReply& f = d.fabric;
  if (f.source().empty()) {
    return {Judge("fabric_store", Verdict::kSkip,
                  "no fabric (set fabric.store = \"etcd://HOST:PORT\" or fabric.file to join "
                  "one)",
                  "links come from [[peer]] tables and mcdmactl link add only")};
  }
  std::vector<CheckResult> out = {StoreResult(f)};
  // A member without a direct path is not linked by design (relays); an
  // evicted one has had its links dropped.
  for (const v1::FabricHostView& h : f.hosts()) {
    if (h.state() == "member" && h.reach() == "direct" && h.link_state() != "up")
      out.push_back(MemberLinkResult(h));
  }
  return out;
}

std::vector<CheckResult> CheckPeers(const DoctorInputs& in) {
  const DaemonInput& d = in.daemon;
  if (!d.status.ok()) return {Judge("peers", Verdict::kSkip, "the daemon is not reachable")};
  if (!d.links_status.ok()) {
    return {Judge("peers", Verdict::kSkip, "the daemon did not list its links",
                  d.links_status.ToString())};
  }
  if (d.links.links().empty()) {
    return {Judge("peers", Verdict::kSkip,
                  d.links.peering() ? "no links" : "no links: peering is off (no fabric key)")};
  }
  std::vector<CheckResult> out;
  for (const auto& link : d.links.links()) out.push_back(LinkResult(link, d.links));
  return out;
}

std::vector<CheckResult> CheckRdmaPorts(const DoctorInputs& in) {
  const DaemonInput& d = in.daemon;
  if (!d.status.ok() || !d.links_status.ok())
    return {Judge("rdma_ports", Verdict::kSkip, "the daemon did not list its RDMA ports")};
  if (d.links.devices().empty()) {
    return {Judge(
        "rdma_ports", Verdict::kSkip,
        "no RDMA port open: " + (d.links.verbs().reason().empty() ? std::string("peering is off")
                                                                  : d.links.verbs().reason()))};
  }
  std::vector<CheckResult> out;
  // A budget this full refuses the next rails or buffers soon.
  auto nearly_spent = [](uint32_t used, uint32_t most) {
    return most != 0 && uint64_t{used} * 10 >= uint64_t{most} * 9;
  };
  for (const v1::LocalVerbs& v : d.links.devices()) {
    auto budget = [](uint32_t used, uint32_t most) {
      return std::to_string(used) + "/" + (most == 0 ? std::string("-") : std::to_string(most));
    };
    const std::string summary = v.rail() + ": " + v.state() + ", GID " + v.gid() + " (index " +
                                std::to_string(v.gid_index()) + "), profile " + v.profile() +
                                ", QPs " + budget(v.queue_pairs(), v.max_queue_pairs()) + ", MRs " +
                                budget(v.registrations(), v.max_registrations());
    if (v.state() != "ACTIVE") {
      out.push_back(Judge(
          "rdma_ports", Verdict::kWarn, summary,
          "the port is down" + (v.port_failure().empty() ? "" : ": " + v.port_failure()) +
              "; its rails carry nothing until it is back",
          "check the cable and the interface of " + v.device() + " (rdma link show; ip link)"));
      continue;
    }
    if (nearly_spent(v.queue_pairs(), v.max_queue_pairs()) ||
        nearly_spent(v.registrations(), v.max_registrations())) {
      out.push_back(Judge("rdma_ports", Verdict::kWarn, summary,
                          "a budget of the " + v.profile() +
                              " profile is nearly spent: new "
                              "rails or buffers on " +
                              v.device() + " will be refused (NO_MEMORY)",
                          "link fewer peers over this device, or use fewer, larger buffers"));
      continue;
    }
    out.push_back(Judge("rdma_ports", Verdict::kOk, summary, "a rail of every link"));
  }
  return out;
}

std::vector<CheckResult> CheckPathMtu(const DoctorInputs& in) {
  const DaemonInput& d = in.daemon;
  std::vector<CheckResult> out;
  if (d.status.ok() && d.links_status.ok()) {
    for (const auto& link : d.links.links()) {
      if (!link.has_verbs()) continue;
      const auto& v = link.verbs();
      const std::string summary = link.peer() + ": path MTU " + std::to_string(v.path_mtu()) +
                                  " (local " + std::to_string(v.local_mtu()) + ", peer " +
                                  std::to_string(v.peer_mtu()) + ")";
      if (v.local_mtu() == v.peer_mtu()) {
        out.push_back(Judge("path_mtu", Verdict::kOk, summary, "both ends use the same MTU"));
        continue;
      }
      const std::string netdev =
          in.config.options.verbs_interface.empty() ? "<if>" : in.config.options.verbs_interface;
      out.push_back(Judge("path_mtu", Verdict::kWarn, summary,
                          "negotiated down to path_mtu " + std::to_string(v.path_mtu()) + ": " +
                              v.device() + " and " + link.peer() + "'s " + v.peer_device() +
                              " have different MTUs",
                          "set the same MTU on both interfaces (" +
                              (HostIsMac(in) ? "sudo ifconfig " + netdev + " mtu N"
                                             : "ip link set " + netdev + " mtu N") +
                              " here and on " + link.peer() +
                              "; Ethernet MTU 1500 gives RDMA MTU 1024, "
                              "9000 gives 4096)"));
    }
  }
  if (out.empty()) out.push_back(Judge("path_mtu", Verdict::kSkip, "no verbs link"));
  return out;
}

}  // namespace mcdma::tools::doctor
