#include "peer/rail_plan.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <set>

namespace mcdma::daemon {
namespace {

bool IsIpLiteral(const std::string& s) {
  unsigned char buf[16];
  return inet_pton(AF_INET, s.c_str(), buf) == 1 || inet_pton(AF_INET6, s.c_str(), buf) == 1;
}

}  // namespace

RailOffer OwnRails(const Options& options) {
  RailOffer out;
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
  for (int i = 0; i < rails.size(); ++i) {
    const v1::PeerRail& r = rails[i];
    std::string where = who + " rail[" + std::to_string(i) + "]";
    if (r.name().empty() || r.name().size() > 128)
      return Status(Code::kInvalid, where + ": a name of 1 to 128 bytes is required");
    if (!names.insert(r.name()).second)
      return Status(Code::kInvalid, where + ": name '" + r.name() + "' is announced twice");
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
