// Private to the verbs transport: the device, its regions and the
// resources one connection is made of (verbs_transport.hpp says how they
// work together).
#pragma once

#include <atomic>
#include <cstdlib>
#include <functional>
#include <map>
#include <thread>

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

// Everything a connection owns, made by CreateEndpoint and moved into the
// connection by Connect. Member order is destruction order reversed: the
// QP goes before its CQ, the regions before the memory they cover.
struct QpResources {
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

  // For the transport's own memory (rings, headers): counted like any other.
  Result<std::unique_ptr<VerbsRegion>> RegisterOwn(std::byte* addr, uint64_t length,
                                                   uint32_t access);
  void ReleaseRegistration() { registrations_.fetch_sub(1); }
  const VerbsConfig& config() const { return config_; }
  const ProtectionDomain& pd() const { return pd_; }
  const Context& context() const { return ctx_; }
  const CompletionChannel& channel() const { return channel_; }
  // Held while CQ events are taken and while a CQ or QP is destroyed.
  Mutex& event_mutex() MCDMA_RETURN_CAPABILITY(mu_) { return mu_; }
  // Why QP `qpn` (or the port) failed asynchronously; "" if it did not.
  // `epoch` changes whenever a new async event arrived.
  std::string AsyncFailure(uint32_t qpn) MCDMA_EXCLUDES(mu_);
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
  void TakeAsyncEvents() MCDMA_EXCLUDES(mu_);

  VerbsConfig config_;
  Context ctx_;
  ProtectionDomain pd_;
  CompletionChannel channel_;
  VerbsDeviceStatus status_;
  std::atomic<uint32_t> registrations_{0};
  std::atomic<uint32_t> hw_send_queue_{0};
  std::atomic<uint32_t> hw_reads_{0};
  std::atomic<uint64_t> hw_read_bytes_{0};
  std::atomic<uint64_t> hw_send_bytes_{0};
  Mutex regions_mu_;
  std::map<uint32_t, VerbsRegion*> regions_ MCDMA_GUARDED_BY(regions_mu_);  // by rkey

  Mutex mu_;
  std::function<void()> notify_ MCDMA_GUARDED_BY(mu_);
  std::map<uint32_t, std::string> qp_failures_ MCDMA_GUARDED_BY(mu_);
  std::string port_failure_ MCDMA_GUARDED_BY(mu_);
  std::atomic<uint64_t> async_epoch_{0};
  platform::Wakeup wake_;  // tells the waiter thread to stop
  std::thread waiter_;
};

inline constexpr uint32_t kCtlBytes = 64;  // per send queue entry: wire + op header

// Connect's second half: the connection over `res` to `remote`.
Result<std::unique_ptr<Connection>> MakeConnection(DeviceImpl* device, QpResources res,
                                                   const EndpointInfo& remote);

}  // namespace mcdma::driver::verbs
