// Local network interfaces (see netif.hpp): one walk of getifaddrs(3) per
// call, on Linux and macOS alike.
#include "platform/netif.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "mcdma_internal/sys.hpp"

namespace mcdma::platform {
namespace {

struct IfAddrsDeleter {
  void operator()(ifaddrs* list) const { freeifaddrs(list); }
};
using IfAddrsPtr = std::unique_ptr<ifaddrs, IfAddrsDeleter>;

Result<IfAddrsPtr> ReadInterfaces(const std::string& what) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return SysError("getifaddrs", errno, what);
  return IfAddrsPtr(list);
}

// An IP literal, parsed: its family and address bytes, and the interface
// an IPv6 "%scope" suffix names (empty when none).
struct IpLiteral {
  int family = AF_UNSPEC;
  in_addr v4{};
  in6_addr v6{};
  std::string scope;
};

bool ParseIp(const std::string& ip, IpLiteral& out) {
  if (inet_pton(AF_INET, ip.c_str(), &out.v4) == 1) {
    out.family = AF_INET;
    return true;
  }
  std::string host = ip;
  if (size_t percent = ip.find('%'); percent != std::string::npos) {
    host = ip.substr(0, percent);
    out.scope = ip.substr(percent + 1);
    if (out.scope.empty()) return false;
  }
  if (inet_pton(AF_INET6, host.c_str(), &out.v6) == 1) {
    out.family = AF_INET6;
    return true;
  }
  return false;
}

bool Holds(const ifaddrs& entry, const IpLiteral& ip) {
  const sockaddr* addr = entry.ifa_addr;
  if (addr == nullptr || addr->sa_family != ip.family) return false;
  if (ip.family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(addr);
    return std::memcmp(&in->sin_addr, &ip.v4, sizeof(ip.v4)) == 0;
  }
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
  if (std::memcmp(&in6->sin6_addr, &ip.v6, sizeof(ip.v6)) != 0) return false;
  return ip.scope.empty() || ip.scope == entry.ifa_name;
}

bool UpWithCarrier(const ifaddrs& entry) {
  constexpr unsigned kUpWithCarrier = IFF_UP | IFF_RUNNING;
  return (entry.ifa_flags & kUpWithCarrier) == kUpWithCarrier;
}

}  // namespace

Result<InterfaceState> InterfaceHolding(const std::string& ip) {
  IpLiteral parsed;
  if (!ParseIp(ip, parsed)) {
    return Status(Code::kInvalid, "InterfaceOfAddress: '" + ip + "' is not an IP address");
  }
  MCDMA_ASSIGN_OR_RETURN(IfAddrsPtr list, ReadInterfaces("looking up " + ip));
  // The entry of an address carries its interface's flags.
  for (const ifaddrs* entry = list.get(); entry != nullptr; entry = entry->ifa_next) {
    if (Holds(*entry, parsed)) return InterfaceState{entry->ifa_name, UpWithCarrier(*entry)};
  }
  return Status(Code::kNotFound, "InterfaceOfAddress: no local interface holds " + ip);
}

Result<std::string> InterfaceOfAddress(const std::string& ip) {
  MCDMA_ASSIGN_OR_RETURN(InterfaceState state, InterfaceHolding(ip));
  return state.name;
}

Result<bool> InterfaceRunning(const std::string& ifname) {
  MCDMA_ASSIGN_OR_RETURN(IfAddrsPtr list, ReadInterfaces("looking up " + ifname));
  // An interface appears once per address (and once for its link layer,
  // even with no address); the flags are the interface's, so the first does.
  for (const ifaddrs* entry = list.get(); entry != nullptr; entry = entry->ifa_next) {
    if (ifname == entry->ifa_name) return UpWithCarrier(*entry);
  }
  return Status(Code::kNotFound, "InterfaceRunning: no interface named '" + ifname + "'");
}

}  // namespace mcdma::platform
