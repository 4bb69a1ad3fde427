// RAII, move-only owners of libibverbs objects. Each is made by a factory
// that returns a Result; a failing verbs call is reported with the call's
// name, the device and errno. Destruction releases in the right order as
// long as owners are declared in creation order (a QP after its CQ and PD,
// an MR after its PD) — members are destroyed in reverse.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "driver/verbs/verbs_model.hpp"
#include "mcdma/status.hpp"

namespace mcdma::driver::verbs {

// "ibv_create_qp(rxe1): Cannot allocate memory (errno 12)".
Status VerbsError(const char* call, const std::string& device, int err);
// A port's state as libibverbs reports it, in the model's terms.
PortState PortStateOf(ibv_port_state s);

// The names of the RDMA devices this host has (ibv_get_device_list).
Result<std::vector<std::string>> ListDevices();

template <typename T, int (*Destroy)(T*)>
struct VerbsDeleter {
  void operator()(T* p) const {
    if (p != nullptr) (void)Destroy(p);
  }
};

class Context {
 public:
  static Result<Context> Open(const std::string& device);
  ibv_context* get() const { return ctx_.get(); }
  const std::string& name() const { return name_; }
  // What the device and port `port` say about themselves (ibv_query_device,
  // ibv_query_port, ibv_query_gid_ex): the input of the model's decisions.
  Result<DeviceInfo> Describe(uint8_t port = 1) const;

 private:
  std::unique_ptr<ibv_context, VerbsDeleter<ibv_context, ibv_close_device>> ctx_;
  std::string name_;
};

class ProtectionDomain {
 public:
  static Result<ProtectionDomain> Create(const Context& ctx);
  ibv_pd* get() const { return pd_.get(); }

 private:
  std::unique_ptr<ibv_pd, VerbsDeleter<ibv_pd, ibv_dealloc_pd>> pd_;
};

// Where a CQ armed with ibv_req_notify_cq reports that it has completions;
// its fd is made non-blocking so a waiter can poll() it with other fds.
class CompletionChannel {
 public:
  static Result<CompletionChannel> Create(const Context& ctx);
  ibv_comp_channel* get() const { return channel_.get(); }
  int fd() const { return channel_->fd; }

 private:
  std::unique_ptr<ibv_comp_channel, VerbsDeleter<ibv_comp_channel, ibv_destroy_comp_channel>>
      channel_;
};

class CompletionQueue {
 public:
  // `channel` may be null (no events); with one, the CQ starts armed.
  static Result<CompletionQueue> Create(const Context& ctx, int entries,
                                        const CompletionChannel* channel = nullptr);
  ibv_cq* get() const { return cq_.get(); }

 private:
  std::unique_ptr<ibv_cq, VerbsDeleter<ibv_cq, ibv_destroy_cq>> cq_;
};

class Registration {
 public:
  static Result<Registration> Create(const ProtectionDomain& pd, void* addr, size_t length,
                                     int access, const std::string& device);
  ibv_mr* get() const { return mr_.get(); }
  uint32_t lkey() const { return mr_->lkey; }
  uint32_t rkey() const { return mr_->rkey; }
  uint64_t addr() const { return reinterpret_cast<uint64_t>(mr_->addr); }

 private:
  std::unique_ptr<ibv_mr, VerbsDeleter<ibv_mr, ibv_dereg_mr>> mr_;
};

// What the other end needs to bring a QP to RTR: exchanged over the
// authenticated peer channel.
struct QpEndpoint {
  uint32_t qpn = 0;
  uint32_t psn = 0;  // 24 bits, random
  std::string gid;   // 16 raw bytes
  uint32_t mtu = 0;  // active MTU in bytes
};

class QueuePair {
 public:
  struct Options {
    ibv_qp_type type = IBV_QPT_RC;
    uint32_t max_send_wr = 64;
    uint32_t max_recv_wr = 64;
    uint32_t max_inline = 0;
    uint32_t max_send_sge = 1;
    uint32_t max_recv_sge = 1;
    uint8_t max_rd_atomic = 1;
  };
  static Result<QueuePair> Create(const ProtectionDomain& pd, const CompletionQueue& send_cq,
                                  const CompletionQueue& recv_cq, const Options& options,
                                  const std::string& device);
  ibv_qp* get() const { return qp_.get(); }
  QpState state() const { return state_; }
  uint32_t qpn() const { return qp_->qp_num; }
  // Bytes a SEND may carry inline (IBV_SEND_INLINE), as the device granted.
  uint32_t max_inline() const { return options_.max_inline; }

  // RESET -> INIT with the given remote access rights.
  Status ToInit(uint8_t port, int access);
  // INIT -> RTR towards `remote` at `path_mtu` bytes, from local GID index.
  Status ToRtr(const QpEndpoint& remote, uint32_t path_mtu, uint8_t port, uint32_t gid_index);
  // RTR -> RTS with our starting PSN.
  Status ToRts(uint32_t psn);
  // Any state -> ERROR: every posted request completes, flushed.
  Status ToError();

 private:
  Status Modify(QpState to, ibv_qp_attr& attr, int mask);
  std::unique_ptr<ibv_qp, VerbsDeleter<ibv_qp, ibv_destroy_qp>> qp_;
  Options options_;
  QpState state_ = QpState::kReset;
  std::string device_;
};

// 24 random bits for a starting PSN (RAND_bytes).
uint32_t RandomPsn();

}  // namespace mcdma::driver::verbs
