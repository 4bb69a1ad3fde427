// This host's fabric interfaces and what lies directly across them.
//
// A fabric cable is an interface with an IPv4 address (a Thunderbolt
// bridge, a point-to-point veth, an Ethernet port). A peer is reached
// directly when one of the addresses it publishes is on the subnet of one
// of this host's fabric interfaces; otherwise only through other daemons.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mcdma/status.hpp"

namespace mcdma::daemon::fabric {

struct LocalNet {
  std::string interface;
  uint32_t address = 0;  // host order
  uint8_t prefix = 32;   // netmask length
};

// "eth0", "tb*,en1": interface names or shell patterns, comma-separated.
// Empty: every interface.
bool InterfaceMatches(std::string_view patterns, std::string_view interface);

// The IPv4 addresses of the interfaces that are up, not loopback, and
// match `patterns` (getifaddrs), sorted by interface then address.
Result<std::vector<LocalNet>> LocalNetworks(std::string_view patterns);

// "10.0.0.1" or "10.0.0.1:7471" -> the address (host order), or nullopt.
bool ParseIPv4(std::string_view text, uint32_t* out);
std::string FormatIPv4(uint32_t address);

// The first of `addresses` ("IPV4:PORT") whose address is on one of
// `nets`' subnets (and is not one of their own addresses), or "".
std::string DirectAddress(const std::vector<std::string>& addresses,
                          const std::vector<LocalNet>& nets);

// This host's fabric addresses: each net's address with `port`.
std::vector<std::string> FabricAddresses(const std::vector<LocalNet>& nets, uint16_t port);

}  // namespace mcdma::daemon::fabric
