// The verbs device: opening and choosing a device, registrations, endpoints
// and the thread that turns completion and async events into notifications.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>

#include "driver/post_checks.hpp"
#include "driver/verbs/verbs_internal.hpp"

namespace mcdma::driver::verbs {
namespace {

constexpr uint32_t kFrameBytes = 4096;  // apple-tb5: one SEND, one RECV, one frame
// How often the waiter reads the port state back when no event came: a
// missed PORT_ACTIVE / PORT_ERR shows within about this long.
constexpr std::chrono::milliseconds kPortReadBackEvery{1000};

int IbvAccess(uint32_t access) {
  int flags = IBV_ACCESS_LOCAL_WRITE;
  if ((access & kAccessRemoteRead) != 0) flags |= IBV_ACCESS_REMOTE_READ;
  if ((access & kAccessRemoteWrite) != 0) flags |= IBV_ACCESS_REMOTE_WRITE;
  return flags;
}

const char* PortStateName(PortState s) {
  switch (s) {
    case PortState::kActive:
      return "ACTIVE";
    case PortState::kDown:
      return "DOWN";
    case PortState::kInit:
      return "INIT";
    case PortState::kArmed:
      return "ARMED";
    case PortState::kUnknown:
      break;
  }
  return "unknown";
}

// What an async event most likely means, for the link's last_error.
std::string AsyncMeaning(ibv_event_type type) {
  switch (type) {
    case IBV_EVENT_QP_FATAL:
      return "QP fatal error (the device could not process a request; the link must be rebuilt)";
    case IBV_EVENT_QP_REQ_ERR:
      return "QP invalid request error (the peer sent a request this QP cannot take: mismatched "
             "profiles or a protocol bug)";
    case IBV_EVENT_QP_ACCESS_ERR:
      return "QP access error (the peer touched memory outside what was granted)";
    case IBV_EVENT_PATH_MIG_ERR:
      return "path migration failed";
    case IBV_EVENT_PORT_ERR:
      return "port went down (cable pulled, or the interface was taken down)";
    case IBV_EVENT_DEVICE_FATAL:
      return "device fatal error (driver reset or device removed)";
    default:
      return ibv_event_type_str(type);
  }
}

// Events about one port (ev.element.port_num); the others are about a QP,
// a CQ, an SRQ or the whole device.
bool IsPortEvent(ibv_event_type type) {
  switch (type) {
    case IBV_EVENT_PORT_ERR:
    case IBV_EVENT_PORT_ACTIVE:
    case IBV_EVENT_LID_CHANGE:
    case IBV_EVENT_PKEY_CHANGE:
    case IBV_EVENT_GID_CHANGE:
    case IBV_EVENT_SM_CHANGE:
    case IBV_EVENT_CLIENT_REREGISTER:
      return true;
    default:
      return false;
  }
}

// The (device, port) pairs of `name` whose port is ACTIVE; none when the
// device cannot be opened or queried.
std::vector<PortRef> ActivePortsOf(const std::string& name) {
  std::vector<PortRef> out;
  auto ctx = Context::Open(name);
  if (!ctx.ok()) return out;
  ibv_device_attr attr{};
  if (ibv_query_device(ctx->get(), &attr) != 0) return out;
  for (uint32_t port = 1; port <= attr.phys_port_cnt; ++port) {
    ibv_port_attr pattr{};
    if (ibv_query_port(ctx->get(), static_cast<uint8_t>(port), &pattr) == 0 &&
        pattr.state == IBV_PORT_ACTIVE) {
      out.push_back({name, static_cast<uint8_t>(port)});
    }
  }
  return out;
}

class EndpointImpl final : public Endpoint {
 public:
  EndpointImpl(DeviceImpl* device, QpResources res) : device_(device), res_(std::move(res)) {}
  ~EndpointImpl() override {
    MutexLock lock(device_->event_mutex());
    res_ = QpResources{};
  }
  std::string LocalInfo() const override { return EncodeEndpoint(res_.local); }
  Result<std::unique_ptr<Connection>> Connect(std::string_view remote_info) override {
    MCDMA_ASSIGN_OR_RETURN(EndpointInfo remote, DecodeEndpoint(remote_info));
    QpResources res = std::move(res_);
    res_ = QpResources{};
    return MakeConnection(device_, std::move(res), remote);
  }

 private:
  DeviceImpl* device_;
  QpResources res_;
};

}  // namespace

AlignedBytes AllocateAligned(uint64_t bytes) {
  uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  uint64_t rounded = (bytes + page - 1) / page * page;
  AlignedBytes p(static_cast<std::byte*>(std::aligned_alloc(page, rounded)));
  if (p) std::memset(p.get(), 0, rounded);
  return p;
}

VerbsRegion::VerbsRegion(DeviceImpl* device, Registration mr, uint64_t length, uint32_t access)
    : device_(device), mr_(std::move(mr)), length_(length), access_(access) {
  device_->AddRegion(this);
}

VerbsRegion::~VerbsRegion() {
  device_->RemoveRegion(this);
  device_->ReleaseRegistration();
}

void DeviceImpl::AddRegion(VerbsRegion* r) {
  MutexLock lock(regions_mu_);
  regions_[r->rkey()] = r;
}

void DeviceImpl::RemoveRegion(VerbsRegion* r) {
  MutexLock lock(regions_mu_);
  auto it = regions_.find(r->rkey());
  if (it != regions_.end() && it->second == r) regions_.erase(it);
}

Code DeviceImpl::CheckRemote(uint32_t rkey, uint64_t addr, uint64_t length, uint32_t access,
                             const VerbsRegion** region) {
  MutexLock lock(regions_mu_);
  auto it = regions_.find(rkey);
  if (it == regions_.end() || (it->second->access() & access) != access) {
    return Code::kPermissionDenied;
  }
  const VerbsRegion* r = it->second;
  uint64_t base = r->RemoteAddr(0);
  if (addr < base || addr - base > r->length() || length > r->length() - (addr - base)) {
    return Code::kOutOfRange;
  }
  *region = r;
  return Code::kOk;
}

void QpSlot::Release() {
  if (device_ != nullptr) device_->ReleaseQueuePair();
  device_ = nullptr;
}

Result<std::vector<PortRef>> ListActivePorts() {
  auto names = ListDevices();
  if (!names.ok()) {
    // No uverbs in the kernel (ENOSYS) or no sysfs: no device, as far as a
    // caller choosing ports is concerned.
    return Status(Code::kNotFound, "no RDMA device (" + names.status().message() + ")");
  }
  if (names->empty()) {
    return Status(
        Code::kNotFound,
        "no RDMA device (ibv_get_device_list found none; /sys/class/infiniband is empty)");
  }
  std::vector<PortRef> out;
  for (const std::string& name : *names) {
    std::vector<PortRef> ports = ActivePortsOf(name);
    out.insert(out.end(), ports.begin(), ports.end());
  }
  std::sort(out.begin(), out.end(), [](const PortRef& a, const PortRef& b) {
    return a.device != b.device ? a.device < b.device : a.port < b.port;
  });
  return out;
}

Result<std::unique_ptr<VerbsDevice>> VerbsDevice::Open(const VerbsConfig& config) {
  MCDMA_ASSIGN_OR_RETURN(std::unique_ptr<DeviceImpl> d, DeviceImpl::Create(config));
  return std::unique_ptr<VerbsDevice>(std::move(d));
}

Result<std::unique_ptr<DeviceImpl>> DeviceImpl::Create(const VerbsConfig& config) {
  MCDMA_ASSIGN_OR_RETURN(std::vector<std::string> names, ListDevices());
  if (names.empty()) {
    return Status(
        Code::kNotFound,
        "no RDMA device (ibv_get_device_list found none; /sys/class/infiniband is empty)");
  }
  if (!config.device.empty()) {
    if (std::find(names.begin(), names.end(), config.device) == names.end()) {
      std::string all;
      for (const std::string& n : names) all += (all.empty() ? "" : ", ") + n;
      return Status(Code::kNotFound,
                    "no RDMA device '" + config.device + "' (this host has: " + all + ")");
    }
    names = {config.device};
  }
  std::string looked;
  for (const std::string& name : names) {
    auto ctx = Context::Open(name);
    if (!ctx.ok()) {
      looked += (looked.empty() ? "" : "; ") + ctx.status().message();
      continue;
    }
    auto info = ctx->Describe(config.port);
    if (!info.ok()) {
      looked += (looked.empty() ? "" : "; ") + info.status().message();
      continue;
    }
    const PortInfo& port = info->ports.front();
    if (port.state != PortState::kActive) {
      looked += (looked.empty() ? "" : "; ") + name + " port " + std::to_string(config.port) +
                " is " + PortStateName(port.state);
      continue;
    }
    GidRule rule{config.interface, std::nullopt};
    if (config.gid_index >= 0) rule.index = static_cast<uint32_t>(config.gid_index);
    auto gid = ChooseGid(port, rule);
    if (!gid.ok()) {
      looked += (looked.empty() ? "" : "; ") + name + ": " + gid.status().message();
      continue;
    }
    std::unique_ptr<DeviceImpl> d(new DeviceImpl());
    d->config_ = config;
    d->status_.detected_profile = DetectProfile(*info);
    std::string profile = config.profile.empty() ? d->status_.detected_profile : config.profile;
    MCDMA_ASSIGN_OR_RETURN(d->status_.caps, ProfileCaps(profile, *info));
    d->status_.caps.software = info->driver == "rxe" || info->driver == "siw";
    d->status_.caps.polled_completions = true;
    d->status_.info = std::move(*info);
    d->status_.gid = std::move(*gid);
    d->ctx_ = std::move(*ctx);
    MCDMA_ASSIGN_OR_RETURN(d->pd_, ProtectionDomain::Create(d->ctx_));
    MCDMA_ASSIGN_OR_RETURN(d->channel_, CompletionChannel::Create(d->ctx_));
    int afd = d->ctx_.get()->async_fd;
    int flags = fcntl(afd, F_GETFL);
    if (flags < 0 || fcntl(afd, F_SETFL, flags | O_NONBLOCK) != 0)
      return VerbsError("fcntl(O_NONBLOCK) on the async event fd", name, errno);
    auto wake = platform::Wakeup::Create();
    if (!wake.ok())
      return Status(wake.status().code(), wake.status().message() + " (" + name + ")");
    d->wake_ = std::move(wake).value();
    d->waiter_ = std::thread([dev = d.get()] { dev->Wait(); });
    return d;
  }
  return Status(Code::kNotFound, "no usable RDMA device: " + looked);
}

DeviceImpl::~DeviceImpl() {
  if (waiter_.joinable()) {
    wake_.Signal();
    waiter_.join();
  }
}

void DeviceImpl::SetNotifier(std::function<void()> notify) {
  MutexLock lock(mu_);
  notify_ = std::move(notify);
}

VerbsHighWater DeviceImpl::high_water() const {
  return {hw_send_queue_.load(), hw_reads_.load(), hw_read_bytes_.load(), hw_send_bytes_.load()};
}

void DeviceImpl::NoteSendQueue(uint32_t used, uint32_t reads, uint64_t read_bytes,
                               uint64_t send_bytes) {
  auto raise = [](auto& hw, auto v) {
    auto cur = hw.load(std::memory_order_relaxed);
    while (v > cur && !hw.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
    }
  };
  raise(hw_send_queue_, used);
  raise(hw_reads_, reads);
  raise(hw_read_bytes_, read_bytes);
  raise(hw_send_bytes_, send_bytes);
}

Result<std::unique_ptr<MemoryRegion>> DeviceImpl::Register(std::byte* addr, uint64_t length,
                                                           uint32_t access) {
  MCDMA_RETURN_IF_ERROR(CheckRegisterRange(addr, length, access, kKnownAccess, caps()));
  MCDMA_ASSIGN_OR_RETURN(std::unique_ptr<VerbsRegion> r, RegisterOwn(addr, length, access));
  return std::unique_ptr<MemoryRegion>(std::move(r));
}

Result<std::unique_ptr<VerbsRegion>> DeviceImpl::RegisterOwn(std::byte* addr, uint64_t length,
                                                             uint32_t access) {
  uint32_t limit = caps().max_registrations;
  uint32_t n = registrations_.fetch_add(1) + 1;
  if (limit != 0 && n > limit) {
    registrations_.fetch_sub(1);
    return Status(Code::kNoMemory, "Register: the device allows at most " + std::to_string(limit) +
                                       " registrations (profile " + caps().profile + ")");
  }
  auto mr = Registration::Create(pd_, addr, length, IbvAccess(access), ctx_.name());
  if (!mr.ok()) {
    registrations_.fetch_sub(1);
    return mr.status();
  }
  return std::make_unique<VerbsRegion>(this, std::move(*mr), length, access);
}

Result<QpSlot> DeviceImpl::ReserveQueuePair() {
  const uint32_t limit = caps().max_queue_pairs;
  uint32_t used = queue_pairs_.load(std::memory_order_relaxed);
  do {
    if (limit != 0 && used >= limit) {
      return Status(Code::kNoMemory, "device " + ctx_.name() + ": its budget of " +
                                         std::to_string(limit) + " queue pairs (profile " +
                                         caps().profile + ") is spent; " + std::to_string(used) +
                                         " in use");
    }
  } while (!queue_pairs_.compare_exchange_weak(used, used + 1, std::memory_order_relaxed));
  return QpSlot(this);
}

Result<std::unique_ptr<Endpoint>> DeviceImpl::CreateEndpoint() {
  const Caps& c = caps();
  const bool uc = QpTypeFor(c) == QpType::kUc;
  QpResources res;
  // First, so a spent budget costs nothing and every later failure gives
  // the slot back with `res`.
  MCDMA_ASSIGN_OR_RETURN(res.slot, ReserveQueuePair());
  uint32_t sq = c.max_outstanding;
  uint32_t depth = std::max<uint32_t>(2, std::min(config_.ring_slots, c.max_outstanding));
  uint64_t slot = uc ? kFrameBytes : std::max<uint32_t>(config_.ring_slot_bytes, kFrameBytes);
  // The ring is one registration: shrink its slots to fit the limit.
  slot = std::min<uint64_t>(slot, c.max_registration_bytes / depth / kFrameBytes * kFrameBytes);
  if (slot <= kWireHeaderBytes) return Status(Code::kInvalid, "receive ring does not fit");
  MCDMA_ASSIGN_OR_RETURN(res.cq,
                         CompletionQueue::Create(ctx_, static_cast<int>(sq + depth), &channel_));
  QueuePair::Options qo;
  qo.type = uc ? IBV_QPT_UC : IBV_QPT_RC;
  qo.max_send_wr = sq;
  qo.max_recv_wr = depth;
  qo.max_send_sge = 2;
  qo.max_recv_sge = 1;
  qo.max_rd_atomic = static_cast<uint8_t>(std::clamp<uint32_t>(c.max_outstanding_reads, 1, 16));
  // Small SENDs (CREDIT, HELLO, short messages) go inline: the device
  // copies them at post time instead of reading them by DMA. A device that
  // allows less than the profile says gets a QP without inline data.
  qo.max_inline = c.max_inline_bytes;
  auto qp = QueuePair::Create(pd_, res.cq, res.cq, qo, ctx_.name());
  if (!qp.ok() && qo.max_inline != 0) {
    qo.max_inline = 0;
    qp = QueuePair::Create(pd_, res.cq, res.cq, qo, ctx_.name());
  }
  if (!qp.ok()) return qp.status();
  res.qp = std::move(*qp);
  int access = IBV_ACCESS_LOCAL_WRITE;
  if (!uc) access |= IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
  MCDMA_RETURN_IF_ERROR(res.qp.ToInit(config_.port, access));
  res.ring_memory = AllocateAligned(depth * slot);
  res.header_memory = AllocateAligned(uint64_t{sq} * kCtlBytes);
  if (!res.ring_memory || !res.header_memory)
    return Status(Code::kNoMemory, "cannot allocate a verbs receive ring");
  MCDMA_ASSIGN_OR_RETURN(res.ring, RegisterOwn(res.ring_memory.get(), depth * slot, 0));
  MCDMA_ASSIGN_OR_RETURN(res.headers,
                         RegisterOwn(res.header_memory.get(), uint64_t{sq} * kCtlBytes, 0));
  EndpointInfo& l = res.local;
  l.unreliable = uc;
  l.profile = c.profile;
  l.device = ctx_.name();
  l.qpn = res.qp.qpn();
  l.psn = RandomPsn();
  l.gid.resize(16);
  ibv_gid gid{};
  if (int rc = ibv_query_gid(ctx_.get(), config_.port, static_cast<int>(status_.gid.index), &gid);
      rc != 0) {
    return VerbsError("ibv_query_gid", ctx_.name(), rc);
  }
  std::memcpy(l.gid.data(), gid.raw, 16);
  l.mtu = status_.info.ports.front().active_mtu;
  l.slot_bytes = static_cast<uint32_t>(slot);
  l.depth = depth;
  l.max_outstanding = sq;
  l.max_reads = c.max_outstanding_reads;
  l.max_read_bytes = c.max_read_bytes;
  l.max_transfer_bytes = c.max_transfer_bytes;
  return std::unique_ptr<Endpoint>(std::make_unique<EndpointImpl>(this, std::move(res)));
}

bool DeviceImpl::port_active() const {
  MutexLock lock(port_mu_);
  return port_active_;
}

std::string DeviceImpl::port_failure() const {
  MutexLock lock(port_mu_);
  return port_failure_;
}

std::string DeviceImpl::AsyncFailure(uint32_t qpn) {
  {
    MutexLock lock(port_mu_);
    if (!port_active_) return port_failure_;
  }
  MutexLock lock(mu_);
  auto it = qp_failures_.find(qpn);
  return it == qp_failures_.end() ? "" : it->second;
}

void DeviceImpl::TakeCompletionEvents() {
  std::function<void()> notify;
  {
    MutexLock lock(mu_);
    ibv_cq* cq = nullptr;
    void* cq_context = nullptr;
    // Not re-armed here: the owner arms a CQ (ConnectionImpl::ArmWakeup)
    // only before it sleeps, so completions reaped by a polling owner cost
    // no event.
    while (ibv_get_cq_event(channel_.get(), &cq, &cq_context) == 0) ibv_ack_cq_events(cq, 1);
    notify = notify_;
  }
  if (notify) notify();
}

void DeviceImpl::SetPort(bool active, std::string failure, bool device_fatal) {
  MutexLock lock(port_mu_);
  if (device_fatal_) return;
  device_fatal_ = device_fatal;
  port_active_ = active;
  port_failure_ = active ? std::string() : std::move(failure);
}

bool DeviceImpl::ReadPortBack() {
  ibv_port_attr attr{};
  // A failed query (a device being removed) leaves what the events said.
  if (ibv_query_port(ctx_.get(), config_.port, &attr) != 0) return false;
  const PortState state = PortStateOf(attr.state);
  const bool active = state == PortState::kActive;
  MutexLock lock(port_mu_);
  if (device_fatal_ || active == port_active_) return false;
  port_active_ = active;
  if (active) {
    port_failure_.clear();
  } else {
    port_failure_ = "port " + std::to_string(config_.port) + " is " + PortStateName(state) +
                    " (read back with ibv_query_port, no port event seen: the interface is "
                    "down or has no carrier)";
  }
  return true;
}

void DeviceImpl::Tell() {
  async_epoch_.fetch_add(1, std::memory_order_release);
  std::function<void()> notify;
  {
    MutexLock lock(mu_);
    notify = notify_;
  }
  if (notify) notify();
}

void DeviceImpl::TakeAsyncEvents() {
  bool counted = false;
  // The last port event of the batch: rxe may coalesce a down and an up.
  std::optional<std::string> port_event;  // "" = ACTIVE, else why it is not
  std::string fatal;                      // DEVICE_FATAL's meaning: nothing revives it
  {
    MutexLock lock(mu_);
    ibv_async_event ev{};
    while (ibv_get_async_event(ctx_.get(), &ev) == 0) {
      const ibv_event_type type = ev.event_type;
      // Another port's events are not this device's business: its
      // connections all use config_.port.
      if (IsPortEvent(type) && ev.element.port_num != config_.port) {
        ibv_ack_async_event(&ev);
        continue;
      }
      counted = true;
      std::string meaning =
          std::string("async event ") + ibv_event_type_str(type) + ": " + AsyncMeaning(type);
      switch (type) {
        case IBV_EVENT_QP_FATAL:
        case IBV_EVENT_QP_REQ_ERR:
        case IBV_EVENT_QP_ACCESS_ERR:
        case IBV_EVENT_PATH_MIG_ERR:
          qp_failures_[ev.element.qp->qp_num] = meaning;
          break;
        case IBV_EVENT_PORT_ERR:
          port_event = meaning;
          break;
        case IBV_EVENT_DEVICE_FATAL:
          fatal = meaning;
          break;
        case IBV_EVENT_PORT_ACTIVE:
          port_event = std::string();
          break;
        default:
          break;
      }
      ibv_ack_async_event(&ev);
    }
  }
  if (!fatal.empty()) {
    SetPort(false, std::move(fatal), true);
  } else if (port_event) {
    // Read before the move: argument order is unspecified.
    const bool active = port_event->empty();
    SetPort(active, std::move(*port_event), false);
  }
  if (ReadPortBack() || counted) Tell();
}

void DeviceImpl::Wait() {
  using Clock = std::chrono::steady_clock;
  auto read_back_at = Clock::now() + kPortReadBackEvery;
  for (;;) {
    pollfd fds[3] = {
        {channel_.fd(), POLLIN, 0}, {ctx_.get()->async_fd, POLLIN, 0}, {wake_.fd(), POLLIN, 0}};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(read_back_at - Clock::now());
    int n = poll(fds, 3, static_cast<int>(std::clamp<int64_t>(left.count(), 0, INT32_MAX)));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || (fds[2].revents & POLLIN) != 0) return;
    if ((fds[0].revents & POLLIN) != 0) TakeCompletionEvents();
    if ((fds[1].revents & POLLIN) != 0) {
      TakeAsyncEvents();  // reads the port back itself
      read_back_at = Clock::now() + kPortReadBackEvery;
    } else if (Clock::now() >= read_back_at) {
      if (ReadPortBack()) Tell();
      read_back_at = Clock::now() + kPortReadBackEvery;
    }
  }
}

}  // namespace mcdma::driver::verbs
