// Local network interfaces: which one holds an address, and whether one is
// up with carrier. The tcp transport's rails (several data connections of
// one link, each over its own interface) use these to bind a socket to the
// interface of its source address and to tell a rail whose cable is out.
// getifaddrs(3) and the IFF_* flags are the same on Linux and macOS, so one
// file serves both (no per-OS file under linux/ or darwin/).
//
// Threading: plain functions; any thread. Each call reads the system's
// interface table afresh (an address or carrier may change at any time).
#pragma once

#include <string>

#include "mcdma/status.hpp"

namespace mcdma::platform {

// The name of the local interface holding the IP literal `ip` (IPv4, or
// IPv6 with an optional %scope naming the interface), e.g. "lo" for
// 127.0.0.1 on Linux. kInvalid when `ip` is not an IP literal, kNotFound
// (naming the address) when no interface holds it, kSystem when the table
// cannot be read.
Result<std::string> InterfaceOfAddress(const std::string& ip);

// The interface holding the IP literal `ip` and whether it is up with
// carrier, from one read of the table (what watching a rail needs every
// 100 ms). Errors as InterfaceOfAddress.
struct InterfaceState {
  std::string name;
  bool running = false;  // IFF_UP and IFF_RUNNING
};
Result<InterfaceState> InterfaceHolding(const std::string& ip);

// Whether the interface `ifname` is administratively up and has carrier
// (IFF_UP and IFF_RUNNING). kNotFound (naming it) when there is no such
// interface, kSystem when the table cannot be read.
Result<bool> InterfaceRunning(const std::string& ifname);

}  // namespace mcdma::platform
