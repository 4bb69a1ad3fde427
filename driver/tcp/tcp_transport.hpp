// tcp: the transport interface over TCP sockets, for two daemons on hosts
// without RDMA. The peer daemon's tcp I/O thread plays the NIC: it applies
// one-sided WRITE/READ frames to its registered memory with the checks a
// NIC's responder makes. The wire format is in tcp_frame.hpp.
//
// Semantics are loop's (loop_transport.hpp), i.e. a NIC's:
//   * memory is registered before use; lkeys/rkeys are random, nonzero and
//     unique among live registrations; RemoteAddr(offset) == offset;
//   * local slices are checked at post time (the Post* Status, as loop);
//     remote access is checked by the peer when the frame arrives: unknown
//     or deregistered rkey, or missing access right -> kPermissionDenied,
//     range outside the region -> kOutOfRange;
//   * Caps limits are enforced at post time: max_outstanding per queue
//     (send and receive queues apiece; posted and not yet reaped) and
//     max_outstanding_reads -> kBusy, max_transfer_bytes / max_read_bytes ->
//     kInvalid;
//   * a SEND consumes the peer's oldest posted RECV; the peer grants one
//     credit per posted RECV and a SEND waits, holding up the requests posted
//     after it, until it has one; a SEND larger than that RECV completes
//     kOutOfRange on both sides and moves no bytes;
//   * every posted request yields exactly one WorkCompletion; completions of
//     SEND/WRITE/READ come in post order, RECVs in post order.
// Unlike loop, work progresses on the device's I/O thread, not in Poll():
// Poll only reaps, and the notifier given to SetNotifier is called (from the
// I/O thread) whenever a connection has something to reap.
//
// Memory: the I/O thread copies straight between sockets and registered
// memory. Destroying a MemoryRegion waits until the I/O thread is not in a
// socket call or copy on it; afterwards its memory is never touched. A
// region destroyed while requests still use it (against the contract in
// transport.hpp) fails them with kPermissionDenied, or takes the connection
// down if it vanishes while its bytes are mid-frame (as a verbs QP enters
// the error state).
//
// Connections: LocalInfo() carries the advertised address, the device's
// port and a random 128-bit token. Connect(remote_info) blocks up to
// TcpOptions::connect_timeout: the side with the lower token dials and
// presents the other's token; the other matches it to this endpoint. Tokens
// travel over the daemons' authenticated peer channel, so knowing one is
// the authorization to connect. Connect fails kInvalid for malformed info or
// the endpoint's own info, kTimeout when the peer does not show up in time,
// kLinkDown when it refuses or is unreachable, kPermissionDenied when the
// peer that dialled in is not the one named. The endpoint is consumed
// either way.
//
// Rails: TcpOptions::rail_addresses names local interface addresses; the
// device listens on each as well (its own listener, served by the same I/O
// thread and handshake). CreateEndpointOn(address) makes an endpoint that
// advertises that address and its listener's port and, when it dials,
// leaves from that address. Where the OS allows (Linux SO_BINDTODEVICE;
// skipped without the privilege, and on macOS) both the rail's listener
// and its dials are bound to the interface holding the address, so a dial
// from a rail towards a peer's rail on another cable is refused at once
// (kLinkDown, ECONNREFUSED) instead of being carried across (Linux answers
// for every local address on every interface, so binding the dial alone
// would not do): a link can probe which of its rails pair up, with a
// timeout of its own, and run one data connection per rail. A rail whose
// cable is out fails its dial by the neighbour timeout (EHOSTUNREACH,
// about 3 s) or the probe's timeout; platform/netif.hpp tells a dead
// interface without dialling.
//
// Failure: a peer that closes, resets, errs, or sends anything malformed
// (tcp_frame.hpp) takes the connection down: every outstanding request
// completes kLinkDown and later posts fail kLinkDown. Destroying a
// Connection sends CLOSE to the peer; its own outstanding work is dropped.
// Abandon() (transport.hpp) fails the posted requests kLinkDown and resets
// the socket instead (SO_LINGER 0: unsent bytes are discarded, the peer
// sees a reset and goes down too).
//
// Threading: as transport.hpp: the device and its children belong to the
// engine thread (Post*/Poll are not thread-safe among themselves). Children
// may outlive the device safely (their posts then fail kLinkDown). Linux
// only (epoll, eventfd).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "driver/transport.hpp"
#include "mcdma/status.hpp"

namespace mcdma::driver::tcp {

struct TcpOptions {
  // Address to listen on for peers' data connections; default "0.0.0.0".
  std::string listen_address = "0.0.0.0";
  // Port to listen on; default 0 = an ephemeral port (see TcpDevice::port).
  uint16_t listen_port = 0;
  // Address peers dial, carried in LocalInfo(); default empty = the listen
  // address, or 127.0.0.1 (::1) when that is 0.0.0.0 (::).
  std::string advertise_address;
  // Limits to report and enforce; default empty = DefaultTcpCaps(). The
  // name is always reported as "tcp".
  std::optional<Caps> caps;
  // How long Connect waits for the peer, and an accepted socket for its
  // HELLO; default 10 s.
  std::chrono::milliseconds connect_timeout{10'000};
  // IP literals of local interfaces to run rails over (see Rails above);
  // default none. The device listens on each, on listen_port's bound port
  // when that is free there, else on an ephemeral one (rail_port). Each
  // must be a distinct, non-wildcard IP literal the host holds, else
  // CreateTcpDevice fails kInvalid (not a literal, a wildcard, a duplicate)
  // or kSystem (cannot bind: not local, ...), naming the address.
  std::vector<std::string> rail_addresses;
};

// name "tcp", profile "tcp", one-sided, 256 requests per queue, 64 READs in
// flight, 64 MiB per READ or WRITE/SEND, 1 TiB per registration, no limit
// on registrations, no inline.
Caps DefaultTcpCaps();

// What a tcp device adds to Device (dynamic_cast a device from
// CreateTcpDevice to reach it).
class TcpDevice : public Device {
 public:
  // The port the device listens on (the bound one when listen_port was 0).
  virtual uint16_t port() const = 0;
  // The address peers are told to dial.
  virtual const std::string& advertise_address() const = 0;
  // The port of the listener bound to rail address `local_address`;
  // nullopt when it is not one of TcpOptions::rail_addresses.
  virtual std::optional<uint16_t> rail_port(const std::string& local_address) const = 0;
  // An endpoint on the rail `local_address` (one of rail_addresses, else
  // kInvalid): its LocalInfo() advertises that address and the port of its
  // listener; its Connect waits up to `connect_timeout` (positive, else
  // kInvalid; usually shorter than TcpOptions::connect_timeout for a probe)
  // and, when this side dials (the lower token), binds the socket's source
  // to `local_address` and, where permitted, to the interface holding it.
  // Otherwise as CreateEndpoint.
  virtual Result<std::unique_ptr<Endpoint>> CreateEndpointOn(
      const std::string& local_address, std::chrono::milliseconds connect_timeout) = 0;
};

// A peer's LocalInfo() whose address is a wildcard ("0.0.0.0" or "::": the
// peer listens on every interface and does not know which one we reach)
// with `address` put in its place; other infos unchanged. kInvalid for
// malformed info.
Result<std::string> RebaseEndpointInfo(std::string_view info, const std::string& address);

// Binds the listening sockets (the device's and one per rail address) and
// starts the I/O thread. Fails kInvalid for caps no work could pass (as
// loop) or an unusable address, kSystem when a socket call fails (e.g. the
// port is taken, a rail address is not local).
Result<std::unique_ptr<Device>> CreateTcpDevice(const TcpOptions& options);

}  // namespace mcdma::driver::tcp
