// LoopDevice, LoopRegion, LoopEndpoint and the factory of the loop transport.
#include "driver/loop/loop_transport.hpp"

#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>

#include "driver/loop/loop_state.hpp"
#include "driver/post_checks.hpp"
#include "driver/profiles.hpp"

namespace mcdma::driver::loop {
namespace {

// One registration. Its keys are in the device's maps exactly while it is
// alive, so a request naming them after destruction finds nothing.
class LoopRegion final : public MemoryRegion {
 public:
  LoopRegion(std::shared_ptr<DeviceState> state, std::byte* addr, uint64_t length, uint32_t access)
      : state_(std::move(state)), addr_(addr), length_(length), access_(access) {
    // Each key is drawn after the previous one is in the maps, so the two
    // differ from each other as well as from every other live key.
    lkey_ = state_->NewKey();
    state_->by_lkey.emplace(lkey_, this);
    rkey_ = state_->NewKey();
    state_->by_rkey.emplace(rkey_, this);
    state_->regions.insert(this);
  }
  ~LoopRegion() override {
    state_->regions.erase(this);
    state_->by_rkey.erase(rkey_);
    state_->by_lkey.erase(lkey_);
  }
  LoopRegion(const LoopRegion&) = delete;
  LoopRegion& operator=(const LoopRegion&) = delete;

  std::byte* addr() const override { return addr_; }
  uint64_t length() const override { return length_; }
  uint32_t lkey() const override { return lkey_; }
  uint32_t rkey() const override { return rkey_; }
  uint32_t access() const override { return access_; }
  // Loop names remote memory by offset within the region the rkey selects.
  uint64_t RemoteAddr(uint64_t offset) const override { return offset; }

 private:
  std::shared_ptr<DeviceState> state_;
  std::byte* addr_;
  uint64_t length_;
  uint32_t access_;
  uint32_t lkey_ = 0;
  uint32_t rkey_ = 0;
};

// The local half before Connect. Its name is bound to it in the device until
// Connect consumes it (or it is destroyed).
class LoopEndpoint final : public Endpoint {
 public:
  LoopEndpoint(std::shared_ptr<DeviceState> state, std::string name)
      : state_(std::move(state)), name_(std::move(name)) {
    state_->names[name_] = nullptr;
  }
  ~LoopEndpoint() override {
    if (!consumed_) state_->names.erase(name_);
  }
  LoopEndpoint(const LoopEndpoint&) = delete;
  LoopEndpoint& operator=(const LoopEndpoint&) = delete;

  std::string LocalInfo() const override { return name_; }
  Result<std::unique_ptr<Connection>> Connect(std::string_view remote_info) override;

 private:
  std::shared_ptr<DeviceState> state_;
  std::string name_;
  bool consumed_ = false;
};

Result<std::unique_ptr<Connection>> LoopEndpoint::Connect(std::string_view remote_info) {
  if (consumed_) {
    return Status(Code::kInvalid, "Connect: endpoint already consumed by an earlier Connect");
  }
  // Consumed whether or not this succeeds: the name stops naming an endpoint.
  consumed_ = true;
  state_->names.erase(name_);
  if (remote_info == name_) {
    return Status(Code::kInvalid, "Connect: an endpoint cannot connect to itself");
  }
  auto it = state_->names.find(std::string(remote_info));
  if (it == state_->names.end()) {
    return Status(Code::kNotFound,
                  "Connect: remote info names no live endpoint of this loop device");
  }
  // The peer either has not connected yet (it will pair with us when it
  // does) or connected first naming us, in which case this completes the pair.
  LoopConnection* peer = it->second;
  if (peer != nullptr && (!peer->waiting() || peer->peer_name() != name_)) {
    return Status(Code::kInvalid, "Connect: the remote endpoint is connected to another endpoint");
  }
  auto conn = std::make_unique<LoopConnection>(state_, name_, std::string(remote_info));
  if (peer != nullptr) LoopConnection::Pair(*conn, *peer);
  return std::unique_ptr<Connection>(std::move(conn));
}

class LoopDevice final : public Device {
 public:
  explicit LoopDevice(Caps caps) : state_(std::make_shared<DeviceState>()) {
    state_->caps = std::move(caps);
    char tag[17];
    std::snprintf(tag, sizeof(tag), "%08x%08x", static_cast<uint32_t>(state_->rng()),
                  static_cast<uint32_t>(state_->rng()));
    state_->tag = tag;
  }

  const Caps& caps() const override { return state_->caps; }
  Result<std::unique_ptr<MemoryRegion>> Register(std::byte* addr, uint64_t length,
                                                 uint32_t access) override;
  Result<std::unique_ptr<Endpoint>> CreateEndpoint() override;

 private:
  // Shared with every child, which may therefore outlive this object safely.
  std::shared_ptr<DeviceState> state_;
};

Result<std::unique_ptr<MemoryRegion>> LoopDevice::Register(std::byte* addr, uint64_t length,
                                                           uint32_t access) {
  MCDMA_RETURN_IF_ERROR(CheckRegisterRange(addr, length, access, kKnownAccess, caps()));
  MCDMA_RETURN_IF_ERROR(CheckRegistrationRoom(state_->regions.size(), caps().max_registrations));
  return std::unique_ptr<MemoryRegion>(std::make_unique<LoopRegion>(state_, addr, length, access));
}

Result<std::unique_ptr<Endpoint>> LoopDevice::CreateEndpoint() {
  std::string name = "loop/" + state_->tag + "/" + std::to_string(state_->next_endpoint++);
  return std::unique_ptr<Endpoint>(std::make_unique<LoopEndpoint>(state_, std::move(name)));
}

}  // namespace

uint32_t DeviceState::NewKey() {
  for (;;) {
    auto key = static_cast<uint32_t>(rng());
    if (key != 0 && !by_lkey.contains(key) && !by_rkey.contains(key)) return key;
  }
}

Caps DefaultLoopCaps() { return ToCaps(kLoopLimits, "loop"); }

Result<std::unique_ptr<Device>> CreateLoopDevice(const Caps* override_caps) {
  Caps caps = override_caps != nullptr ? *override_caps : DefaultLoopCaps();
  caps.name = "loop";
  MCDMA_RETURN_IF_ERROR(CheckDeviceCaps("CreateLoopDevice", caps));
  return std::unique_ptr<Device>(std::make_unique<LoopDevice>(std::move(caps)));
}

}  // namespace mcdma::driver::loop
