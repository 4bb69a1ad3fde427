// What the verbs transport decides from a device's description alone — no
// libibverbs call, so it is unit-tested against recorded descriptions:
// which GID to use, the path MTU two ends agree on, the device profile and
// the limits (Caps) it implies, and which QP state transitions are legal.
//
// The rules (docs/architecture.md §17, docs/protocol.md):
//   * GID: the RoCE v2 IPv4-mapped GID on the configured interface (any
//     interface when none is configured); else the configured index; never
//     "index 1" by habit. No candidate is an error that lists what the port
//     has.
//   * MTU: the smaller of the two ends' active MTUs; both must be IB MTUs
//     (256, 512, 1024, 2048, 4096 bytes).
//   * Profile: "apple-tb5" for Apple's RDMA over Thunderbolt 5 (transport
//     type 100, devices rdma_enN), "mcdma-cx5" for the MCDMA ConnectX-5
//     macOS provider (devices mcrdmaN), else "linux-rc". Detection reads the
//     description only, so it happens before any QP exists: Apple's devices
//     refuse RC QPs (ibv_create_qp fails with errno 102), and the profile
//     decides the QP type (QpTypeFor). A configured profile overrides
//     detection; the Caps of a profile forced onto a device are the
//     stricter of the two for every limit.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "driver/transport.hpp"
#include "mcdma/status.hpp"

namespace mcdma::driver::verbs {

enum class GidType : uint8_t { kIb, kRoceV1, kRoceV2 };

struct Gid {
  uint32_t index = 0;
  std::string value;  // as sysfs prints it: 8 groups of 4 hex digits
  GidType type = GidType::kIb;
  std::string netdev;  // the network interface it belongs to ("" for IB)
};

enum class PortState : uint8_t { kUnknown = 0, kDown = 1, kInit = 2, kArmed = 3, kActive = 4 };

struct PortInfo {
  uint8_t num = 1;
  PortState state = PortState::kUnknown;
  std::string link_layer;   // "Ethernet" (RoCE) or "InfiniBand"
  uint32_t active_mtu = 0;  // bytes
  uint32_t max_mtu = 0;     // bytes
  std::vector<Gid> gids;    // non-zero entries only
};

// ibv_device::transport_type of Apple's RDMA over Thunderbolt devices
// (ibv_devinfo prints "transport: Thunderbolt (100)"); rdma-core's enum
// has no name for it.
inline constexpr uint32_t kTransportAppleThunderbolt = 100;

struct DeviceInfo {
  std::string name;        // "rxe1", "mlx5_0", "rdma_en2", "mcrdma0", ...
  std::string driver;      // "rxe", "mlx5", "mcdma", "apple-tb", ...
  uint32_t transport = 0;  // ibv_device::transport_type (0 = InfiniBand, 100 = Thunderbolt)
  uint32_t vendor_id = 0;
  uint32_t vendor_part_id = 0;
  uint32_t max_qp_wr = 0;
  uint32_t max_qp_rd_atom = 0;
  uint64_t max_mr_size = 0;
  uint32_t max_mr = 0;
  uint32_t max_qp = 0;  // queue pairs the device holds at once; 0 = not reported
  std::vector<PortInfo> ports;
};

// Parses "DEVICE/PATH=VALUE" lines (see tests/unit/data/rxe_veth.sysfs):
// driver, transport, attr/{vendor_id,vendor_part_id,max_qp_wr,max_qp_rd_atom,
// max_mr_size,max_mr,max_qp}, ports/N/{state,link_layer,active_mtu,max_mtu},
// ports/N/gids/I, ports/N/gid_attrs/{types,ndevs}/I. '#' starts a comment;
// unknown paths are ignored. kInvalid names the bad line.
Result<std::vector<DeviceInfo>> ParseDeviceDump(std::string_view text);

// True for ::ffff:a.b.c.d, the form RoCE v2 uses for IPv4 addresses.
bool IsIpv4Mapped(const std::string& gid);

struct GidRule {
  std::string netdev;             // the interface peers are reached on; "" = any
  std::optional<uint32_t> index;  // configured fallback
};
Result<Gid> ChooseGid(const PortInfo& port, const GidRule& rule);

// Path MTU both ends can use (bytes); kInvalid for a value that is not an
// IB MTU.
Result<uint32_t> NegotiateMtu(uint32_t local_bytes, uint32_t remote_bytes);
// 256 -> 1 ... 4096 -> 5 (enum ibv_mtu); 0 when not an IB MTU.
uint32_t MtuCode(uint32_t bytes);

inline constexpr const char* kProfileLinuxRc = "linux-rc";
inline constexpr const char* kProfileMcdmaCx5 = "mcdma-cx5";
inline constexpr const char* kProfileAppleTb5 = "apple-tb5";

std::string DetectProfile(const DeviceInfo& device);
// The Caps of `profile` on `device` (kInvalid for an unknown profile name).
Result<Caps> ProfileCaps(const std::string& profile, const DeviceInfo& device);

// The QP type a profile's endpoints are created with: UC for apple-tb5
// (SEND/RECV only; the only type its devices take), else RC.
enum class QpType : uint8_t { kRc, kUc };
QpType QpTypeFor(const Caps& caps);

enum class QpState : uint8_t { kReset, kInit, kRtr, kRts, kError };
const char* QpStateName(QpState s);
// RESET -> INIT -> RTR -> RTS; any state -> ERROR or RESET. Anything else
// is kInvalid, naming both states.
Status CheckQpTransition(QpState from, QpState to);

}  // namespace mcdma::driver::verbs
