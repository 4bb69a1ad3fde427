// TcpDevice, TcpRegion, TcpEndpoint (the handshake) and the factory.
#include <exception>
#include <limits>
#include <string>
#include <utility>

#include "driver/post_checks.hpp"
#include "driver/profiles.hpp"
#include "driver/tcp/tcp_connection.hpp"
#include "driver/tcp/tcp_frame.hpp"
#include "driver/tcp/tcp_transport.hpp"
#include "mcdma_internal/sys.hpp"

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

class TcpEndpoint final : public Endpoint {
 public:
  TcpEndpoint(std::shared_ptr<DeviceCore> core, Token token)
      : core_(std::move(core)), token_(token) {
    core_->rendezvous.Open(token_);
  }
  ~TcpEndpoint() override { core_->rendezvous.Close(token_); }
  TcpEndpoint(const TcpEndpoint&) = delete;
  TcpEndpoint& operator=(const TcpEndpoint&) = delete;

  std::string LocalInfo() const override {
    return EncodeEndpointInfo(
        {.address = core_->advertise_address, .port = core_->port, .token = token_});
  }
  Result<std::unique_ptr<Connection>> Connect(std::string_view remote_info) override;

 private:
  Result<Fd> Dial(const EndpointInfo& remote, Deadline deadline);
  Result<Fd> Answer(const EndpointInfo& remote, Deadline deadline);

  std::shared_ptr<DeviceCore> core_;
  Token token_;
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
    Deadline deadline = std::chrono::steady_clock::now() + core_->connect_timeout;
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
  MCDMA_ASSIGN_OR_RETURN(Fd fd, tcp::Dial(remote.address, remote.port, deadline));
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
  void SetNotifier(std::function<void()> notify) override {
    core_->io.SetNotifier(std::move(notify));
  }
  uint16_t port() const override { return core_->port; }
  const std::string& advertise_address() const override { return core_->advertise_address; }

 private:
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
  return std::unique_ptr<Endpoint>(std::make_unique<TcpEndpoint>(core_, token));
}

std::string DefaultAdvertise(const std::string& listen) {
  if (listen == "0.0.0.0" || listen.empty()) return "127.0.0.1";
  if (listen == "::") return "::1";
  return listen;
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
  auto core = std::make_shared<DeviceCore>(std::move(caps), options.connect_timeout);
  core->port = port;
  core->advertise_address = options.advertise_address.empty()
                                ? DefaultAdvertise(options.listen_address)
                                : options.advertise_address;
  MCDMA_RETURN_IF_ERROR(core->io.Start(std::move(listener)));
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
