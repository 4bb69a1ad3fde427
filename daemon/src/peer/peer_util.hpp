// Small helpers of the peer plane: addresses.
#pragma once

#include <string>

#include "config/options.hpp"
#include "mcdma/status.hpp"

namespace mcdma::daemon {

// The host part of "host[:port]" / "[v6]:port".
inline Result<std::string> HostOf(const std::string& address) {
  MCDMA_ASSIGN_OR_RETURN(auto hp, SplitHostPort(address, kDefaultPeerPort));
  return hp.first;
}

// The IP address in a gRPC peer string ("ipv4:10.0.0.1:5000",
// "ipv6:[::1]:5000", "ipv6:%5B::1%5D:5000"); empty for anything else.
inline std::string IpOfGrpcPeer(const std::string& peer) {
  std::string rest;
  if (peer.rfind("ipv4:", 0) == 0) {
    rest = peer.substr(5);
    auto colon = rest.rfind(':');
    return colon == std::string::npos ? rest : rest.substr(0, colon);
  }
  if (peer.rfind("ipv6:", 0) == 0) {
    rest = peer.substr(5);
    for (const auto& [from, to] : {std::pair<std::string, std::string>{"%5B", "["}, {"%5D", "]"}}) {
      for (auto pos = rest.find(from); pos != std::string::npos; pos = rest.find(from))
        rest.replace(pos, from.size(), to);
    }
    auto open = rest.find('[');
    auto close = rest.find(']');
    if (open == std::string::npos || close == std::string::npos || close < open) return {};
    return rest.substr(open + 1, close - open - 1);
  }
  return {};
}

// "host:port" with IPv6 hosts bracketed.
inline std::string JoinHostPort(const std::string& host, uint32_t port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

}  // namespace mcdma::daemon
