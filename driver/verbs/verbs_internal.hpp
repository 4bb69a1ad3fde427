// Private to the verbs transport: the device, its regions and the
// resources one connection is made of (verbs_transport.hpp says how they
// work together).
#pragma once

#include <atomic>
#include <cstdlib>
#include <functional>
#include <map>
#include <thread>
#include <utility>

#include "driver/verbs/verbs_objects.hpp"
#include "driver/verbs/verbs_transport.hpp"
#include "driver/verbs/verbs_wire.hpp"
#include "mcdma_internal/thread_annotations.hpp"
#include "platform/wakeup.hpp"

namespace mcdma::driver::verbs {

class DeviceImpl;

struct FreeBytes {
  void operator()(std::byte* p) const { std::free(p); }
};
using AlignedBytes = std::unique_ptr<std::byte, FreeBytes>;
// Page-aligned, zeroed; null when out of memory.
AlignedBytes AllocateAligned(uint64_t bytes);

class VerbsRegion final : public MemoryRegion {
 public:
  VerbsRegion(DeviceImpl* device, Registration mr, uint64_t length, uint32_t access);
  ~VerbsRegion() override;
  std::byte* addr() const override { return reinterpret_cast<std::byte*>(mr_.addr()); }
  uint64_t length() const override { return length_; }
  uint32_t lkey() const override { return mr_.lkey(); }
  uint32_t rkey() const override { return mr_.rkey(); }
  uint32_t access() const override { return access_; }
  uint64_t RemoteAddr(uint64_t offset) const override { return mr_.addr() + offset; }
  const DeviceImpl* device() const { return device_; }

 private:
  DeviceImpl* device_;
  Registration mr_;
  uint64_t length_;
  uint32_t access_;
};

// One queue pair of the device's budget (caps().max_queue_pairs): taken by
// DeviceImpl::ReserveQueuePair before the QP is created, given back when it
// is destroyed, on whichever path that happens (a failed CreateEndpoint or
// Connect, the endpoint, the connection), so the count cannot leak.
// Move-only; any thread (the count is atomic).
class QpSlot {
 public:
  QpSlot() = default;
  explicit QpSlot(DeviceImpl* device) : device_(device) {}
  QpSlot(QpSlot&& other) noexcept : device_(std::exchange(other.device_, nullptr)) {}
  QpSlot& operator=(QpSlot&& other) noexcept {
    if (this != &other) {
      Release();
      device_ = std::exchange(other.device_, nullptr);
    }
    return *this;
  }
  ~QpSlot() { Release(); }

 private:
  void Release();
  DeviceImpl* device_ = nullptr;
};

// Everything a connection owns, made by CreateEndpoint and moved into the
// connection by Connect. Member order is destruction order reversed: the
// QP goes before its CQ, the regions before the memory they cover, and the
// budget slot last, once the QP is gone.
struct QpResources {
  QpSlot slot;
  CompletionQueue cq;
  QueuePair qp;
  AlignedBytes ring_memory;  // depth slots of slot_bytes
  std::unique_ptr<VerbsRegion> ring;
  AlignedBytes header_memory;  // kCtlBytes of headers per send queue entry
  std::unique_ptr<VerbsRegion> headers;
  EndpointInfo local;
  bool ring_posted = false;
};

class DeviceImpl final : public VerbsDevice {
 public:
  ~DeviceImpl() override;
  static Result<std::unique_ptr<DeviceImpl>> Create(const VerbsConfig& config);

  const Caps& caps() const override { return status_.caps; }
  const VerbsDeviceStatus& status() const override { return status_; }
  VerbsHighWater high_water() const override;
  Result<std::unique_ptr<MemoryRegion>> Register(std::byte* addr, uint64_t length,
                                                 uint32_t access) override;
  Result<std::unique_ptr<Endpoint>> CreateEndpoint() override;
  void SetNotifier(std::function<void()> notify) override MCDMA_EXCLUDES(mu_);
  bool port_active() const override MCDMA_EXCLUDES(port_mu_);
  std::string port_failure() const override MCDMA_EXCLUDES(port_mu_);
  uint32_t queue_pairs() const override { return queue_pairs_.load(std::memory_order_relaxed); }
  uint32_t registrations() const override { return registrations_.load(std::memory_order_relaxed); }

  // For the transport's own memory (rings, headers): counted like any other.
  Result<std::unique_ptr<VerbsRegion>> RegisterOwn(std::byte* addr, uint64_t length,
                                                   uint32_t access);
  void ReleaseRegistration() { registrations_.fetch_sub(1); }
  // One QP of the budget, or kNoMemory naming the budget when it is spent.
  Result<QpSlot> ReserveQueuePair();
  void ReleaseQueuePair() { queue_pairs_.fetch_sub(1); }
  const VerbsConfig& config() const { return config_; }
  const ProtectionDomain& pd() const { return pd_; }
  const Context& context() const { return ctx_; }
  const CompletionChannel& channel() const { return channel_; }
  // Held while CQ events are taken and while a CQ or QP is destroyed.
  Mutex& event_mutex() MCDMA_RETURN_CAPABILITY(mu_) { return mu_; }
  // Why QP `qpn` (or the port) failed asynchronously; "" if it did not.
  // The port's failure lasts while the port is not active. async_epoch()
  // changes whenever an async event counted or the port state changed.
  std::string AsyncFailure(uint32_t qpn) MCDMA_EXCLUDES(mu_, port_mu_);
  uint64_t async_epoch() const { return async_epoch_.load(std::memory_order_acquire); }
  void NoteSendQueue(uint32_t used, uint32_t reads, uint64_t read_bytes, uint64_t send_bytes);
  // Regions by rkey, for one-sided operations streamed by a peer whose
  // profile has no RDMA READ/WRITE: the checks a NIC would make.
  void AddRegion(VerbsRegion* r) MCDMA_EXCLUDES(regions_mu_);
  void RemoveRegion(VerbsRegion* r) MCDMA_EXCLUDES(regions_mu_);
  // kOk, or kPermissionDenied (unknown rkey, or `access` not granted) or
  // kOutOfRange (outside the region); `at` is where the range starts.
  Code CheckRemote(uint32_t rkey, uint64_t addr, uint64_t length, uint32_t access,
                   const VerbsRegion** region) MCDMA_EXCLUDES(regions_mu_);

 private:
  DeviceImpl() = default;
  void Wait();
  void TakeCompletionEvents() MCDMA_EXCLUDES(mu_);
  void TakeAsyncEvents() MCDMA_EXCLUDES(mu_, port_mu_);
  // What a port event said: active, or down with `failure`; device_fatal
  // keeps the port down for good.
  void SetPort(bool active, std::string failure, bool device_fatal) MCDMA_EXCLUDES(port_mu_);
  // Reads the port state back (ibv_query_port) and lets it win over the
  // events; true when port_active() changed.
  bool ReadPortBack() MCDMA_EXCLUDES(port_mu_);
  // Moves the epoch on and calls the notifier: connections look again.
  void Tell() MCDMA_EXCLUDES(mu_);

  VerbsConfig config_;
  Context ctx_;
  ProtectionDomain pd_;
  CompletionChannel channel_;
  VerbsDeviceStatus status_;
  std::atomic<uint32_t> registrations_{0};
  std::atomic<uint32_t> queue_pairs_{0};
  std::atomic<uint32_t> hw_send_queue_{0};
  std::atomic<uint32_t> hw_reads_{0};
  std::atomic<uint64_t> hw_read_bytes_{0};
  std::atomic<uint64_t> hw_send_bytes_{0};
  Mutex regions_mu_;
  std::map<uint32_t, VerbsRegion*> regions_ MCDMA_GUARDED_BY(regions_mu_);  // by rkey

  Mutex mu_;
  std::function<void()> notify_ MCDMA_GUARDED_BY(mu_);
  std::map<uint32_t, std::string> qp_failures_ MCDMA_GUARDED_BY(mu_);
  // The port's state: written by the waiter thread only, read by anyone.
  // Not mu_, which is held while CQ events are taken and QPs destroyed.
  mutable Mutex port_mu_;
  bool port_active_ MCDMA_GUARDED_BY(port_mu_) = true;   // Create opens ACTIVE ports only
  std::string port_failure_ MCDMA_GUARDED_BY(port_mu_);  // non-empty iff !port_active_
  bool device_fatal_ MCDMA_GUARDED_BY(port_mu_) = false;
  std::atomic<uint64_t> async_epoch_{0};
  platform::Wakeup wake_;  // tells the waiter thread to stop
  std::thread waiter_;
};

inline constexpr uint32_t kCtlBytes = 64;  // per send queue entry: wire + op header

// Connect's second half: the connection over `res` to `remote`.
Result<std::unique_ptr<Connection>> MakeConnection(DeviceImpl* device, QpResources res,
                                                   const EndpointInfo& remote);

}  // namespace mcdma::driver::verbs
