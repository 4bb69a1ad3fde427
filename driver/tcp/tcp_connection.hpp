// The engine-side objects of the tcp transport: the state a device shares
// with its children, and TcpConnection (post-time checks, Poll). Internal;
// include tcp_transport.hpp instead.
//
// Ownership: a TcpDevice and every region, endpoint and connection created
// from it hold one shared DeviceCore, so children may outlive the device.
// Members are declared in dependency order (the I/O thread uses the
// registry and the rendezvous), so destruction runs in reverse.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "driver/post_checks.hpp"
#include "driver/tcp/tcp_io.hpp"
#include "driver/tcp/tcp_registry.hpp"
#include "driver/tcp/tcp_shared.hpp"
#include "driver/transport.hpp"
#include "mcdma/status.hpp"

namespace mcdma::driver::tcp {

struct DeviceCore {
  DeviceCore(Caps caps_in, std::chrono::milliseconds timeout)
      : caps(std::move(caps_in)),
        connect_timeout(timeout),
        registry(caps.max_registrations),
        io(registry, rendezvous, timeout) {}

  // A rail's listener: the local address it is bound to and its port.
  struct Rail {
    std::string address;
    uint16_t port = 0;
  };

  const Caps caps;
  const std::chrono::milliseconds connect_timeout;
  std::string advertise_address;  // set once, before any child exists
  uint16_t port = 0;              // likewise
  std::vector<Rail> rails;        // likewise; in TcpOptions::rail_addresses order
  Registry registry;
  Rendezvous rendezvous;
  IoThread io;
};

// One data connection, engine side. Work runs on the I/O thread (tcp_wire.hpp).
class TcpConnection final : public CheckedConnection {
 public:
  TcpConnection(std::shared_ptr<DeviceCore> core, std::shared_ptr<ConnShared> shared)
      : core_(std::move(core)), shared_(std::move(shared)) {}
  // Tells the I/O thread to close the socket (the peer sees CLOSE, unless
  // the connection was abandoned or is down already).
  ~TcpConnection() override;
  TcpConnection(const TcpConnection&) = delete;
  TcpConnection& operator=(const TcpConnection&) = delete;

  const Caps& caps() const override { return core_->caps; }
  // Reaps only; never blocks on the I/O thread beyond a short mutex.
  size_t Poll(std::span<WorkCompletion> out) override;
  // Down at once for later posts; the I/O thread then completes what was
  // posted kLinkDown and resets the socket (IoThread::Reset).
  void Abandon() override;

 private:
  // Every request needs the connection up (the I/O thread marks it down).
  Status CheckState(const char* op, WorkOp kind) const override;
  Result<uint64_t> CheckLocal(const char* op, const LocalSlice& slice) const override;
  // Hands the request to the I/O thread (tcp_wire.hpp runs it).
  void Enqueue(const PostedRequest& request) override;

  std::shared_ptr<DeviceCore> core_;
  std::shared_ptr<ConnShared> shared_;
  bool abandoned_ = false;
};

}  // namespace mcdma::driver::tcp
