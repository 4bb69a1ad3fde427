// TcpDevice, TcpRegion, TcpEndpoint (the handshake), rails and the factory.
#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <exception>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "driver/post_checks.hpp"
#include "driver/profiles.hpp"
#include "driver/tcp/tcp_connection.hpp"
#include "driver/tcp/tcp_frame.hpp"
#include "driver/tcp/tcp_transport.hpp"
#include "mcdma_internal/sys.hpp"
#include "platform/netif.hpp"

namespace mcdma::driver::tcp {
namespace {

Result<Token> NewToken() {
  try {
    std::optional<Token> token = TokenFromHex(RandomHex(kTokenBytes));
    if (token) return *token;
  } catch (const std::exception& e) {
    return Status(Code::kInternal, std::string("CreateEndpoint: ") + e.what());
  }
  return Status(Code::kInternal, "CreateEndpoint: bad random token");
}

// One registration; reachable by the I/O thread exactly while alive.
class TcpRegion final : public MemoryRegion {
 public:
  explicit TcpRegion(std::shared_ptr<DeviceCore> core) : core_(std::move(core)) {}
  ~TcpRegion() override {
    if (added_) core_->registry.Remove(entry_);
  }
  TcpRegion(const TcpRegion&) = delete;
  TcpRegion& operator=(const TcpRegion&) = delete;

  Status Add(std::byte* addr, uint64_t length, uint32_t access) {
    entry_.addr = addr;
    entry_.length = length;
    entry_.access = access;
    entry_.owner = this;
    MCDMA_RETURN_IF_ERROR(core_->registry.Add(entry_));
    added_ = true;
    return Status::Ok();
  }

  std::byte* addr() const override { return entry_.addr; }
  uint64_t length() const override { return entry_.length; }
  uint32_t lkey() const override { return entry_.lkey; }
  uint32_t rkey() const override { return entry_.rkey; }
  uint32_t access() const override { return entry_.access; }
  // tcp names remote memory by offset within the region the rkey selects.
  uint64_t RemoteAddr(uint64_t offset) const override { return offset; }

 private:
  std::shared_ptr<DeviceCore> core_;
  RegionEntry entry_;
  bool added_ = false;
};

// Where an endpoint is reached, how long its Connect waits, and where it
// dials from: the device's listener (CreateEndpoint) or a rail's.
struct EndpointPlace {
  std::string advertise_address;
  uint16_t port = 0;
  std::chrono::milliseconds connect_timeout{0};
  std::string source_address;  // a rail's address; empty: the kernel picks
};

class TcpEndpoint final : public Endpoint {
 public:
  TcpEndpoint(std::shared_ptr<DeviceCore> core, Token token, EndpointPlace place)
      : core_(std::move(core)), token_(token), place_(std::move(place)) {
    core_->rendezvous.Open(token_);
  }
  ~TcpEndpoint() override { core_->rendezvous.Close(token_); }
  TcpEndpoint(const TcpEndpoint&) = delete;
  TcpEndpoint& operator=(const TcpEndpoint&) = delete;

  std::string LocalInfo() const override {
    return EncodeEndpointInfo(
        {.address = place_.advertise_address, .port = place_.port, .token = token_});
  }
  Result<std::unique_ptr<Connection>> Connect(std::string_view remote_info) override;

 private:
  Result<Fd> Dial(const EndpointInfo& remote, Deadline deadline);
  Result<Fd> Answer(const EndpointInfo& remote, Deadline deadline);

  std::shared_ptr<DeviceCore> core_;
  Token token_;
  const EndpointPlace place_;
  bool consumed_ = false;
};

Result<std::unique_ptr<Connection>> TcpEndpoint::Connect(std::string_view remote_info) {
  if (consumed_) {
    return Status(Code::kInvalid, "Connect: endpoint already consumed by an earlier Connect");
  }
  consumed_ = true;
  Result<EndpointInfo> remote = ParseEndpointInfo(remote_info);
  Result<Fd> fd = Status(Code::kInvalid, "Connect: an endpoint cannot connect to itself");
  if (!remote.ok()) {
    fd = Status(Code::kInvalid, "Connect: " + remote.status().message());
  } else if (remote->token != token_) {
    Deadline deadline = std::chrono::steady_clock::now() + place_.connect_timeout;
    // Exactly one side dials: the one whose token is lower.
    fd = token_ < remote->token ? Dial(*remote, deadline) : Answer(*remote, deadline);
  }
  // Consumed whether or not this succeeded: the token stops naming anything.
  core_->rendezvous.Close(token_);
  if (!fd.ok()) return fd.status();
  auto shared = std::make_shared<ConnShared>();
  core_->io.Adopt(std::move(fd).value(), shared);
  return std::unique_ptr<Connection>(std::make_unique<TcpConnection>(core_, std::move(shared)));
}

Result<Fd> TcpEndpoint::Dial(const EndpointInfo& remote, Deadline deadline) {
  core_->rendezvous.Close(token_);  // nobody dials the dialer
  DialSource source{.address = place_.source_address, .ifname = {}};
  if (!source.address.empty()) {
    // Looked up now: addresses move. None found (the address just went
    // away): the dial goes unbound to an interface, and binding the source
    // address says why it fails.
    Result<std::string> ifname = platform::InterfaceOfAddress(source.address);
    if (ifname.ok()) source.ifname = std::move(ifname).value();
  }
  MCDMA_ASSIGN_OR_RETURN(Fd fd, tcp::Dial(remote.address, remote.port, deadline, source));
  auto hello = EncodeHello(/*target=*/remote.token, /*sender=*/token_);
  MCDMA_RETURN_IF_ERROR(WriteAll(fd.get(), hello, deadline));
  std::array<std::byte, kHelloFrameBytes> answer{};
  Status read = ReadExact(fd.get(), answer, deadline);
  if (read.code() == Code::kLinkDown) {
    return Status(Code::kLinkDown,
                  "Connect: the peer refused the connection (unknown or consumed endpoint)");
  }
  MCDMA_RETURN_IF_ERROR(read);
  Result<Hello> reply = DecodeHello(answer.data());
  if (!reply.ok() || reply->target != token_ || reply->sender != remote.token) {
    return Status(Code::kLinkDown, "Connect: the peer answered with a bad HELLO");
  }
  return fd;
}

Result<Fd> TcpEndpoint::Answer(const EndpointInfo& remote, Deadline deadline) {
  MCDMA_ASSIGN_OR_RETURN(Rendezvous::Arrival arrival, core_->rendezvous.Await(token_, deadline));
  if (arrival.sender != remote.token) {
    return Status(Code::kPermissionDenied,
                  "Connect: the peer that dialled in is not the endpoint named");
  }
  auto hello = EncodeHello(/*target=*/remote.token, /*sender=*/token_);
  MCDMA_RETURN_IF_ERROR(WriteAll(arrival.fd.get(), hello, deadline));
  return std::move(arrival.fd);
}

class TcpDeviceImpl final : public TcpDevice {
 public:
  explicit TcpDeviceImpl(std::shared_ptr<DeviceCore> core) : core_(std::move(core)) {}
  // Stops the I/O thread: every connection goes down; children stay safe.
  ~TcpDeviceImpl() override {
    core_->rendezvous.Shutdown();
    core_->io.Stop();
  }
  TcpDeviceImpl(const TcpDeviceImpl&) = delete;
  TcpDeviceImpl& operator=(const TcpDeviceImpl&) = delete;

  const Caps& caps() const override { return core_->caps; }
  Result<std::unique_ptr<MemoryRegion>> Register(std::byte* addr, uint64_t length,
                                                 uint32_t access) override;
  Result<std::unique_ptr<Endpoint>> CreateEndpoint() override;
  Result<std::unique_ptr<Endpoint>> CreateEndpointOn(
      const std::string& local_address, std::chrono::milliseconds connect_timeout) override;
  void SetNotifier(std::function<void()> notify) override {
    core_->io.SetNotifier(std::move(notify));
  }
  uint16_t port() const override { return core_->port; }
  const std::string& advertise_address() const override { return core_->advertise_address; }
  std::optional<uint16_t> rail_port(const std::string& local_address) const override {
    const DeviceCore::Rail* rail = FindRail(local_address);
    return rail == nullptr ? std::nullopt : std::optional<uint16_t>(rail->port);
  }

 private:
  const DeviceCore::Rail* FindRail(const std::string& local_address) const {
    auto it =
        std::find_if(core_->rails.begin(), core_->rails.end(),
                     [&](const DeviceCore::Rail& rail) { return rail.address == local_address; });
    return it == core_->rails.end() ? nullptr : &*it;
  }

  std::shared_ptr<DeviceCore> core_;
};

Result<std::unique_ptr<MemoryRegion>> TcpDeviceImpl::Register(std::byte* addr, uint64_t length,
                                                              uint32_t access) {
  MCDMA_RETURN_IF_ERROR(CheckRegisterRange(addr, length, access, kKnownAccess, caps()));
  auto region = std::make_unique<TcpRegion>(core_);
  MCDMA_RETURN_IF_ERROR(region->Add(addr, length, access));
  return std::unique_ptr<MemoryRegion>(std::move(region));
}

Result<std::unique_ptr<Endpoint>> TcpDeviceImpl::CreateEndpoint() {
  MCDMA_ASSIGN_OR_RETURN(Token token, NewToken());
  EndpointPlace place{.advertise_address = core_->advertise_address,
                      .port = core_->port,
                      .connect_timeout = core_->connect_timeout,
                      .source_address = {}};
  return std::unique_ptr<Endpoint>(std::make_unique<TcpEndpoint>(core_, token, std::move(place)));
}

Result<std::unique_ptr<Endpoint>> TcpDeviceImpl::CreateEndpointOn(
    const std::string& local_address, std::chrono::milliseconds connect_timeout) {
  const DeviceCore::Rail* rail = FindRail(local_address);
  if (rail == nullptr) {
    return Status(Code::kInvalid, "CreateEndpointOn: '" + local_address +
                                      "' is not one of the device's rail addresses");
  }
  if (connect_timeout.count() <= 0) {
    return Status(Code::kInvalid, "CreateEndpointOn: connect_timeout must be positive");
  }
  MCDMA_ASSIGN_OR_RETURN(Token token, NewToken());
  EndpointPlace place{.advertise_address = rail->address,
                      .port = rail->port,
                      .connect_timeout = connect_timeout,
                      .source_address = rail->address};
  return std::unique_ptr<Endpoint>(std::make_unique<TcpEndpoint>(core_, token, std::move(place)));
}

std::string DefaultAdvertise(const std::string& listen) {
  if (listen == "0.0.0.0" || listen.empty()) return "127.0.0.1";
  if (listen == "::") return "::1";
  return listen;
}

// kInvalid unless `address` is a specific (not a wildcard) IP literal.
Status CheckRailAddress(const std::string& address) {
  in_addr v4{};
  in6_addr v6{};
  if (inet_pton(AF_INET, address.c_str(), &v4) == 1) {
    if (v4.s_addr != htonl(INADDR_ANY)) return Status::Ok();
  } else if (inet_pton(AF_INET6, address.c_str(), &v6) == 1) {
    if (!IN6_IS_ADDR_UNSPECIFIED(&v6)) return Status::Ok();
  } else {
    return Status(Code::kInvalid,
                  "CreateTcpDevice: rail address '" + address + "' is not an IP address");
  }
  return Status(Code::kInvalid, "CreateTcpDevice: rail address '" + address +
                                    "' is a wildcard (a rail needs one interface's address)");
}

// One listener per rail address: on `port` (the device's) where that is
// free at the address, else on an ephemeral port.
Status ListenOnRails(const std::vector<std::string>& addresses, uint16_t port,
                     std::vector<Fd>& listeners, std::vector<DeviceCore::Rail>& rails) {
  for (const std::string& address : addresses) {
    MCDMA_RETURN_IF_ERROR(CheckRailAddress(address));
    if (std::count(addresses.begin(), addresses.end(), address) > 1) {
      return Status(Code::kInvalid,
                    "CreateTcpDevice: rail address '" + address + "' is listed twice");
    }
    // Bound to the interface holding the address (found now: the listener
    // stays on it), the listener refuses dials that arrive over another
    // cable; Linux would otherwise take them (any local address is
    // reachable over any interface). None holds it (127.0.0.2 on lo): as
    // the device's own listener.
    Result<std::string> ifname = platform::InterfaceOfAddress(address);
    std::string device = ifname.ok() ? std::move(ifname).value() : std::string();
    Result<Fd> listener = Listen(address, port, device);
    if (!listener.ok()) listener = Listen(address, 0, device);
    if (!listener.ok()) {
      return Status(listener.status().code(), "CreateTcpDevice: rail address '" + address +
                                                  "': " + listener.status().message());
    }
    MCDMA_ASSIGN_OR_RETURN(uint16_t bound, BoundPort(listener->get()));
    rails.push_back({.address = address, .port = bound});
    listeners.push_back(std::move(listener).value());
  }
  return Status::Ok();
}

}  // namespace

Caps DefaultTcpCaps() { return ToCaps(kTcpLimits, "tcp"); }

Result<std::unique_ptr<Device>> CreateTcpDevice(const TcpOptions& options) {
  Caps caps = options.caps.value_or(DefaultTcpCaps());
  caps.name = "tcp";
  MCDMA_RETURN_IF_ERROR(CheckDeviceCaps("CreateTcpDevice", caps));
  if (options.connect_timeout.count() <= 0) {
    return Status(Code::kInvalid, "CreateTcpDevice: connect_timeout must be positive");
  }
  if (options.advertise_address.find_first_of(" \t\n") != std::string::npos) {
    return Status(Code::kInvalid, "CreateTcpDevice: advertise_address contains whitespace");
  }
  MCDMA_ASSIGN_OR_RETURN(Fd listener, Listen(options.listen_address, options.listen_port));
  MCDMA_ASSIGN_OR_RETURN(uint16_t port, BoundPort(listener.get()));
  std::vector<Fd> listeners;
  listeners.push_back(std::move(listener));
  std::vector<DeviceCore::Rail> rails;
  MCDMA_RETURN_IF_ERROR(ListenOnRails(options.rail_addresses, port, listeners, rails));
  auto core = std::make_shared<DeviceCore>(std::move(caps), options.connect_timeout);
  core->port = port;
  core->advertise_address = options.advertise_address.empty()
                                ? DefaultAdvertise(options.listen_address)
                                : options.advertise_address;
  core->rails = std::move(rails);
  MCDMA_RETURN_IF_ERROR(core->io.Start(std::move(listeners)));
  return std::unique_ptr<Device>(std::make_unique<TcpDeviceImpl>(std::move(core)));
}

}  // namespace mcdma::driver::tcp

namespace mcdma::driver::tcp {

Result<std::string> RebaseEndpointInfo(std::string_view info, const std::string& address) {
  MCDMA_ASSIGN_OR_RETURN(EndpointInfo parsed, ParseEndpointInfo(info));
  if (parsed.address != "0.0.0.0" && parsed.address != "::") return std::string(info);
  if (address.empty() || address.find_first_of(" \t\n") != std::string::npos)
    return Status(Code::kInvalid, "RebaseEndpointInfo: bad address '" + address + "'");
  parsed.address = address;
  return EncodeEndpointInfo(parsed);
}

}  // namespace mcdma::driver::tcp
