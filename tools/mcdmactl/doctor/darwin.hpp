// The macOS checks of `mcdmactl doctor`, as pure functions of what was
// gathered (DarwinInputs): the output of macOS commands as recorded text and
// the host's interface addresses as values. Nothing here runs a command or
// touches the host, so the parsers and checks are unit-tested on Linux
// against recorded outputs (tests/unit/data/darwin/);
// doctor_darwin_gather.hpp gathers the inputs on a Mac.
//
// The checks, each naming its fix:
//   thunderbolt_rdma    `rdma_ctl status` says RDMA over Thunderbolt is
//                       enabled (Apple's rdma_enN devices)
//   cx5_kext            the MCDMA ConnectX-5 kext (org.mcdma.cx5.native,
//                       the mcrdmaN devices) is loaded, and its version
//   thunderbolt_bridge  the "Thunderbolt Bridge" network service is off
//                       while rdma_enN devices exist
//   memlock             launchd's memlock limit (`launchctl limit memlock`)
//   peer_address        no configured peer address is on an mcrdmaN
//                       interface's subnet (those carry RDMA, not TCP)
// The device, port and GID checks are the common ones (doctor_checks.hpp),
// worded for macOS when DoctorInputs::host_os says so.
//
// Parsers are tolerant of case, surrounding whitespace and lines they do not
// know; output they cannot make sense of is kInvalid with a message quoting
// it, which the checks turn into a warn that says so ("could not parse").
//
// Threads: plain functions on values; call from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "doctor/result.hpp"
#include "mcdma/status.hpp"

namespace mcdma::tools::doctor {

// The MCDMA ConnectX-5 kext and the RDMA devices (and, for mcrdmaN, the
// network interfaces) it creates.
inline constexpr const char* kCx5BundleId = "org.mcdma.cx5.native";
inline constexpr const char* kCx5DevicePrefix = "mcrdma";
// Apple's RDMA over Thunderbolt: rdma_enN is the RDMA device on the
// Thunderbolt network interface enN.
inline constexpr const char* kThunderboltDevicePrefix = "rdma_en";
inline constexpr const char* kThunderboltBridge = "Thunderbolt Bridge";

// What one command printed, as doctor_darwin_gather.cpp ran it.
struct CommandOutput {
  // As shown to the user: "rdma_ctl status".
  std::string command;
  // Not ok when there is no complete output: the tool was not found, could
  // not be started, ran past its timeout or printed more than the bound.
  Status status = Status(Code::kUnavailable, "not run");
  int exit_code = 0;  // when status is ok
  std::string out;    // stdout
  std::string err;    // stderr (kmutil's "No variant specified, ..." lands here)
};

// One address of one network interface, as getifaddrs() lists it.
struct InterfaceAddress {
  std::string name;     // "mcrdma0", "en0"
  std::string family;   // "inet" or "inet6"
  std::string address;  // numeric: "192.168.50.2", "fe80::1"
  std::string netmask;  // numeric, same family; empty when there is none
};

struct InterfacesInput {
  // getifaddrs() failed (or a recorded list was unreadable); `addresses` is
  // then empty.
  Status status;
  std::vector<InterfaceAddress> addresses;
};

struct DarwinInputs {
  CommandOutput rdma_ctl;      // rdma_ctl status
  CommandOutput kmutil;        // kmutil showloaded --list-only
  CommandOutput networksetup;  // networksetup -listallnetworkservices
  CommandOutput memlock;       // launchctl limit memlock
  InterfacesInput interfaces;
};

// A configured peer with its address's host part (no port, no brackets).
struct DarwinPeer {
  std::string name;
  std::string host;  // an IP literal or a host name
};

// What the macOS checks need from the configuration and the devices, as
// plain values: RunChecks fills it from DoctorInputs (DarwinContextOf), so
// this header needs neither the daemon's options nor protobuf.
struct DarwinContext {
  std::vector<std::string> devices;  // RDMA device names, as listed
  std::string chosen_device;         // the one the daemon would use; "" none
  bool all_peers_tcp = false;        // peers configured, each with transport "tcp"
  uint64_t memlock_needed = 0;       // bytes (MemlockNeeded)
  std::string memlock_formula;       // how memlock_needed was computed
  std::vector<DarwinPeer> peers;
};

// ---- Parsers ----

// `rdma_ctl status`: true for enabled, false for disabled ("not enabled"
// counts as disabled). kInvalid when it says neither, or both.
Result<bool> ParseRdmaCtlStatus(std::string_view text);

struct LoadedKext {
  std::string bundle_id;  // "org.mcdma.cx5.native"
  std::string version;    // "1.2.0"; empty when the row has none
};
// `kmutil showloaded [--list-only]` (and kextstat): one entry per row
// "Index Refs Address Size Wired Name (Version) UUID <Linked Against>". The
// header line is optional (--list-only omits it), other lines are ignored.
// kInvalid when there is neither a header nor a single row.
Result<std::vector<LoadedKext>> ParseKmutilShowloaded(std::string_view text);

struct NetworkService {
  std::string name;  // "Thunderbolt Bridge"
  bool enabled = true;
};
// `networksetup -listallnetworkservices`: after the line "An asterisk (*)
// denotes that a network service is disabled.", one service per line, a
// leading '*' marking it disabled. kInvalid without that line.
Result<std::vector<NetworkService>> ParseNetworkServices(std::string_view text);

struct LimitPair {
  bool soft_unlimited = false;
  uint64_t soft = 0;  // bytes, when not unlimited
  bool hard_unlimited = false;
  uint64_t hard = 0;
};
// `launchctl limit RESOURCE`: the line "RESOURCE SOFT HARD", each value
// "unlimited" or a number of bytes (RLIM_INFINITY printed as a number counts
// as unlimited). kInvalid when there is no such line.
Result<LimitPair> ParseLaunchctlLimit(std::string_view text, std::string_view resource);

// A recorded interface list, as the tests keep getifaddrs() results: "NAME
// FAMILY ADDRESS [NETMASK]" per line, FAMILY inet or inet6, '#' starting a
// comment. kInvalid names the bad line.
Result<std::vector<InterfaceAddress>> ParseInterfaceList(std::string_view text);

// True when `ip` (an IP literal of iface's family, an IPv6 "%zone" ignored)
// is in the subnet of `iface`'s address and netmask; a missing netmask means
// the address alone. False for anything that does not parse.
bool OnSubnet(const std::string& ip, const InterfaceAddress& iface);

// ---- Checks ----

CheckResult CheckThunderboltRdma(const DarwinInputs& in, const DarwinContext& ctx);
CheckResult CheckCx5Kext(const DarwinInputs& in, const DarwinContext& ctx);
CheckResult CheckThunderboltBridge(const DarwinInputs& in, const DarwinContext& ctx);
CheckResult CheckLaunchdMemlock(const DarwinInputs& in, const DarwinContext& ctx);
CheckResult CheckPeerAddresses(const DarwinInputs& in, const DarwinContext& ctx);

// The network interface a macOS RDMA device is on when its GIDs do not say:
// mcrdmaN is its own interface, rdma_enN is on enN; "" for other names.
std::string MacDeviceInterface(const std::string& device);

}  // namespace mcdma::tools::doctor
