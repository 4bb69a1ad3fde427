#include "peer/rail_plan.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "driver/verbs/verbs_wire.hpp"
#include "peer/transport_choice.hpp"

namespace mcdma::daemon {
namespace {

bool IsIpLiteral(const std::string& s) {
  unsigned char buf[16];
  return inet_pton(AF_INET, s.c_str(), buf) == 1 || inet_pton(AF_INET6, s.c_str(), buf) == 1;
}

bool KnownProfile(const std::string& p) {
  return p == "linux-rc" || p == "mcdma-cx5" || p == "apple-tb5";
}

// A GID as status displays and Hello spell it: eight groups of four hex
// digits joined by ':'.
bool IsGidText(const std::string& g) {
  if (g.size() != 39) return false;
  for (size_t i = 0; i < g.size(); ++i) {
    bool colon = i % 5 == 4;
    if (colon ? g[i] != ':' : std::isxdigit(static_cast<unsigned char>(g[i])) == 0) return false;
  }
  return true;
}

bool SameGid(const std::string& a, const std::string& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

Status CheckVerbsEndpoint(const std::string& info, const v1::PeerRail& announced,
                          const std::string& who) {
  MCDMA_ASSIGN_OR_RETURN(driver::verbs::EndpointInfo ep, driver::verbs::DecodeEndpoint(info));
  std::string gid = GidText(ep.gid);
  if (ep.device != announced.device() || !SameGid(gid, announced.gid())) {
    return Status(Code::kInvalid, who + "'s endpoint for rail '" + announced.name() +
                                      "' is device " + ep.device + " GID " + gid +
                                      ", but its Hello announced device " + announced.device() +
                                      " GID " + announced.gid());
  }
  if (!ProfilesMeet(ep.profile, announced.profile()))
    return Status(Code::kInvalid, who + "'s endpoint for rail '" + announced.name() +
                                      "' runs profile " + ep.profile + ", its Hello announced " +
                                      announced.profile());
  return Status::Ok();
}

bool ProfilesMeet(const std::string& a, const std::string& b) {
  // apple-tb5 is UC; the others RC: a QP of one type cannot talk to the other.
  return (a == "apple-tb5") == (b == "apple-tb5");
}

RailOffer OwnRails(const Options& options, const std::vector<LocalVerbsInfo>& rdma) {
  RailOffer out;
  for (const LocalVerbsInfo& p : rdma) {
    v1::PeerRail* r = out.Add();
    r->set_name(p.rail);
    r->set_transport("verbs");
    r->set_profile(p.profile);
    r->set_gid(p.gid);
    r->set_device(p.device);
    r->set_port(p.port);
  }
  for (const RailConfig& rc : options.rails) {
    v1::PeerRail* r = out.Add();
    r->set_name(rc.name.empty() ? "tcp:" + rc.address : rc.name);
    r->set_transport(rc.transport.empty() ? "tcp" : rc.transport);
    r->set_address(rc.address);
  }
  return out;
}

Status CheckRailOffer(const RailOffer& rails, const std::string& who) {
  if (rails.size() > kMaxRailsOffered) {
    return Status(Code::kInvalid, who + " announces " + std::to_string(rails.size()) +
                                      " rails; at most " + std::to_string(kMaxRailsOffered));
  }
  std::set<std::string> names;
  std::set<std::string> devices;
  for (int i = 0; i < rails.size(); ++i) {
    const v1::PeerRail& r = rails[i];
    std::string where = who + " rail[" + std::to_string(i) + "]";
    if (r.name().empty() || r.name().size() > 128)
      return Status(Code::kInvalid, where + ": a name of 1 to 128 bytes is required");
    if (!names.insert(r.name()).second)
      return Status(Code::kInvalid, where + ": name '" + r.name() + "' is announced twice");
    if (r.transport() == "verbs") {
      if (r.device().empty() || r.device().size() > 64)
        return Status(Code::kInvalid, where + ": a verbs rail names its device (1 to 64 bytes)");
      if (r.port() < 1 || r.port() > 255)
        return Status(Code::kInvalid,
                      where + ": port " + std::to_string(r.port()) + " is not in 1..255");
      if (!KnownProfile(r.profile()))
        return Status(Code::kInvalid, where + ": profile '" + r.profile() + "' is unknown");
      if (!IsGidText(r.gid()))
        return Status(Code::kInvalid, where + ": GID '" + r.gid() + "' is not a GID");
      if (!devices.insert(r.device()).second)
        return Status(Code::kInvalid, where + ": device '" + r.device() + "' is announced twice");
      continue;
    }
    if (r.transport() != "tcp")
      return Status(Code::kInvalid,
                    where + ": transport \"" + r.transport() + "\" is not a rail transport here");
    if (!IsIpLiteral(r.address()))
      return Status(Code::kInvalid, where + ": address '" + r.address() + "' is not an IP address");
  }
  return Status::Ok();
}

std::vector<RailPair> PlanRails(const RailOffer& dialer, const RailOffer& callee) {
  std::vector<RailPair> plan;
  for (const v1::PeerRail& d : dialer) {
    for (const v1::PeerRail& c : callee) {
      if (d.transport() != c.transport()) continue;
      if (d.transport() == "verbs" && !ProfilesMeet(d.profile(), c.profile())) continue;
      RailPair p;
      p.dialer = d;
      p.callee = c;
      plan.push_back(std::move(p));
    }
  }
  std::sort(plan.begin(), plan.end(), [](const RailPair& a, const RailPair& b) {
    if (a.dialer.name() != b.dialer.name()) return a.dialer.name() < b.dialer.name();
    return a.callee.name() < b.callee.name();
  });
  if (plan.size() > kMaxRailPairs) plan.resize(kMaxRailPairs);
  for (size_t i = 0; i < plan.size(); ++i) plan[i].index = static_cast<uint32_t>(i + 1);
  return plan;
}

Result<RailPair> FindRailPair(const std::vector<RailPair>& plan, uint32_t index,
                              const std::string& dialer_rail, const std::string& callee_rail) {
  if (index == 0 || index > plan.size()) {
    return Status(Code::kInvalid, "rail " + std::to_string(index) + " is not in the plan of " +
                                      std::to_string(plan.size()) + " rails both ends announced");
  }
  const RailPair& p = plan[index - 1];
  if (p.dialer.name() != dialer_rail || p.callee.name() != callee_rail) {
    return Status(Code::kInvalid, "rail " + std::to_string(index) + " is ('" + p.dialer.name() +
                                      "', '" + p.callee.name() +
                                      "') in the canonical order, not ('" + dialer_rail + "', '" +
                                      callee_rail + "')");
  }
  return p;
}

}  // namespace mcdma::daemon
