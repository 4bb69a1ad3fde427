#include "peer/transport_choice.hpp"

#include <algorithm>
#include <cstdio>

#include "driver/verbs/verbs_model.hpp"
#include "driver/verbs/verbs_wire.hpp"

namespace mcdma::daemon {
namespace {

bool Unreliable(const std::string& profile) { return profile == driver::verbs::kProfileAppleTb5; }

}  // namespace

std::string GidText(const std::string& raw) {
  if (raw.size() != 16) return "";
  std::string out;
  char buf[8];
  for (size_t i = 0; i < 16; i += 2) {
    std::snprintf(buf, sizeof(buf), "%02x%02x", static_cast<unsigned char>(raw[i]),
                  static_cast<unsigned char>(raw[i + 1]));
    out += (i == 0 ? "" : ":");
    out += buf;
  }
  return out;
}

Result<TransportChoice> ChooseTransport(const std::string& requested, const std::string& peer,
                                        const LocalVerbsInfo& local, const VerbsOffer& remote,
                                        bool peer_offers_tcp) {
  auto tcp = [&](std::string why) -> Result<TransportChoice> {
    if (!peer_offers_tcp)
      return Status(Code::kInvalid, Reason::kTransportRefused,
                    "peer '" + peer + "' offers no tcp transport");
    return TransportChoice{Transport::kTcp, std::move(why)};
  };
  if (requested == "tcp") return tcp("tcp asked for in config");
  std::string missing;
  if (!local.available) {
    missing = "this host has no usable RDMA device (" + local.reason + ")";
  } else if (!remote.offered) {
    missing = "peer '" + peer + "' offers no verbs transport (no usable RDMA device there)";
  } else if (Unreliable(local.profile) != Unreliable(remote.profile)) {
    missing = "profiles cannot meet: " + local.profile + " here, " + remote.profile + " on peer '" +
              peer + "' (UC against RC); force the same verbs.profile on both";
  }
  if (requested == "verbs") {
    if (!missing.empty())
      return Status(Code::kInvalid, Reason::kTransportRefused,
                    "transport \"verbs\" was asked for, but " + missing);
    return TransportChoice{Transport::kVerbs, "verbs asked for in config (" + local.device +
                                                  ", profile " + local.profile + ")"};
  }
  if (!missing.empty()) return tcp("auto: " + missing + "; using tcp");
  if (!peer_offers_tcp)
    return TransportChoice{Transport::kVerbs, "auto: the peer offers no tcp; verbs (" +
                                                  local.device + ", profile " + local.profile +
                                                  " / " + remote.profile + ")"};
  // Both have RDMA: the link itself runs on tcp, the rail of last resort,
  // and the RDMA device pairs that reach each other become its rails (on
  // a host with several devices, which pairs meet is for the probes to
  // find, not for one device here and one there to decide).
  return tcp(
      "auto: tcp carries the link when no RDMA rail is up; RDMA rails over every device "
      "pair that reaches (" +
      local.device + " here, profile " + local.profile + "; peer profile " + remote.profile + ")");
}

Result<v1::VerbsPath> DescribeVerbsPath(const LocalVerbsInfo& local, const std::string& local_info,
                                        const std::string& remote_info) {
  MCDMA_ASSIGN_OR_RETURN(driver::verbs::EndpointInfo l, driver::verbs::DecodeEndpoint(local_info));
  MCDMA_ASSIGN_OR_RETURN(driver::verbs::EndpointInfo r, driver::verbs::DecodeEndpoint(remote_info));
  v1::VerbsPath p;
  p.set_device(l.device);
  p.set_port(local.port);
  p.set_gid_index(local.gid_index);
  p.set_gid(GidText(l.gid));
  std::string profile = l.profile;
  for (const char* strict : {driver::verbs::kProfileAppleTb5, driver::verbs::kProfileMcdmaCx5}) {
    if (l.profile == strict || r.profile == strict) {
      profile = strict;
      break;
    }
  }
  p.set_profile(profile);
  p.set_local_mtu(l.mtu);
  p.set_peer_mtu(r.mtu);
  p.set_path_mtu(std::min(l.mtu, r.mtu));
  p.set_local_qpn(l.qpn);
  p.set_peer_qpn(r.qpn);
  p.set_peer_device(r.device);
  p.set_peer_gid(GidText(r.gid));
  return p;
}

}  // namespace mcdma::daemon
