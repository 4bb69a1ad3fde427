#include "fabric/local_networks.hpp"

#include <arpa/inet.h>
#include <fnmatch.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <tuple>

namespace mcdma::daemon::fabric {

bool InterfaceMatches(std::string_view patterns, std::string_view interface) {
  if (patterns.empty()) return true;
  std::string name(interface);
  size_t start = 0;
  while (start <= patterns.size()) {
    size_t comma = patterns.find(',', start);
    if (comma == std::string_view::npos) comma = patterns.size();
    std::string one(patterns.substr(start, comma - start));
    one.erase(0, one.find_first_not_of(' '));
    one.erase(one.find_last_not_of(' ') + 1);
    if (!one.empty() && fnmatch(one.c_str(), name.c_str(), 0) == 0) return true;
    start = comma + 1;
  }
  return false;
}

Result<std::vector<LocalNet>> LocalNetworks(std::string_view patterns) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0)
    return Status(Code::kInternal, std::string("getifaddrs: ") + std::strerror(errno));
  std::vector<LocalNet> nets;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    if ((a->ifa_flags & IFF_UP) == 0 || (a->ifa_flags & IFF_LOOPBACK) != 0) continue;
    if (!InterfaceMatches(patterns, a->ifa_name)) continue;
    LocalNet n;
    n.interface = a->ifa_name;
    n.address = ntohl(reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr);
    uint32_t mask = 0xffffffffu;
    if (a->ifa_netmask != nullptr)
      mask = ntohl(reinterpret_cast<const sockaddr_in*>(a->ifa_netmask)->sin_addr.s_addr);
    n.prefix = static_cast<uint8_t>(__builtin_popcount(mask));
    nets.push_back(std::move(n));
  }
  freeifaddrs(list);
  std::sort(nets.begin(), nets.end(), [](const LocalNet& x, const LocalNet& y) {
    return std::tie(x.interface, x.address) < std::tie(y.interface, y.address);
  });
  return nets;
}

bool ParseIPv4(std::string_view text, uint32_t* out) {
  std::string host(text.substr(0, text.find(':')));
  in_addr a{};
  if (inet_pton(AF_INET, host.c_str(), &a) != 1) return false;
  *out = ntohl(a.s_addr);
  return true;
}

std::string FormatIPv4(uint32_t address) {
  in_addr a{};
  a.s_addr = htonl(address);
  char buf[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &a, buf, sizeof buf);
  return buf;
}

std::string DirectAddress(const std::vector<std::string>& addresses,
                          const std::vector<LocalNet>& nets) {
  for (const auto& text : addresses) {
    uint32_t ip = 0;
    if (!ParseIPv4(text, &ip)) continue;
    for (const auto& n : nets) {
      uint32_t mask = n.prefix == 0 ? 0 : ~uint32_t{0} << (32 - n.prefix);
      if (ip != n.address && (ip & mask) == (n.address & mask)) return text;
    }
  }
  return "";
}

std::vector<std::string> FabricAddresses(const std::vector<LocalNet>& nets, uint16_t port) {
  std::vector<std::string> out;
  for (const auto& n : nets) {
    std::string a = FormatIPv4(n.address) + ":" + std::to_string(port);
    if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(std::move(a));
  }
  return out;
}

}  // namespace mcdma::daemon::fabric
