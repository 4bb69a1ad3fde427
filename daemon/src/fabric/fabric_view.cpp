#include "fabric/fabric_view.hpp"

#include <algorithm>

namespace mcdma::daemon::fabric {

Reach ReachOf(const std::string& self, const v1::FabricHostRecord& peer,
              const std::vector<LocalNet>& nets, const Cables* cables) {
  Reach r;
  std::vector<std::string> addresses(peer.addresses().begin(), peer.addresses().end());
  if (cables != nullptr) {
    auto pair = std::minmax(self, peer.host());
    if (cables->count({pair.first, pair.second}) == 0) {
      r.detail = "no cable to it in the fabric file";
      return r;
    }
    r.address = DirectAddress(addresses, nets);
    if (r.address.empty() && !addresses.empty()) r.address = addresses.front();
    r.detail = "cabled in the fabric file";
  } else {
    r.address = DirectAddress(addresses, nets);
    if (r.address.empty()) {
      r.detail = addresses.empty() ? "it publishes no address"
                                   : "none of its addresses is on a subnet of this host's "
                                     "fabric interfaces";
      return r;
    }
    uint32_t ip = 0;
    ParseIPv4(r.address, &ip);
    for (const auto& n : nets) {
      uint32_t mask = n.prefix == 0 ? 0 : ~uint32_t{0} << (32 - n.prefix);
      if ((ip & mask) == (n.address & mask)) {
        r.detail = "via " + n.interface;
        break;
      }
    }
  }
  r.direct = !r.address.empty();
  r.dials = r.direct && self < peer.host();
  return r;
}

}  // namespace mcdma::daemon::fabric
