#include "driver/verbs/verbs_objects.hpp"

#include <fcntl.h>
#include <net/if.h>
#include <openssl/rand.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace mcdma::driver::verbs {
namespace {

uint32_t MtuBytes(ibv_mtu mtu) {
  switch (mtu) {
    case IBV_MTU_256:
      return 256;
    case IBV_MTU_512:
      return 512;
    case IBV_MTU_1024:
      return 1024;
    case IBV_MTU_2048:
      return 2048;
    case IBV_MTU_4096:
      return 4096;
  }
  return 0;
}

std::string GidText(const ibv_gid& gid) {
  char buf[40];
  const uint8_t* r = gid.raw;
  std::snprintf(buf, sizeof(buf),
                "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x", r[0],
                r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12], r[13],
                r[14], r[15]);
  return buf;
}

}  // namespace

PortState PortStateOf(ibv_port_state s) {
  switch (s) {
    case IBV_PORT_DOWN:
      return PortState::kDown;
    case IBV_PORT_INIT:
      return PortState::kInit;
    case IBV_PORT_ARMED:
      return PortState::kArmed;
    case IBV_PORT_ACTIVE:
      return PortState::kActive;
    default:
      return PortState::kUnknown;
  }
}

Status VerbsError(const char* call, const std::string& device, int err) {
  return Status(err == ENOMEM ? Code::kNoMemory : Code::kSystem,
                std::string(call) + "(" + device + "): " + std::strerror(err) + " (errno " +
                    std::to_string(err) + ")");
}

Result<std::vector<std::string>> ListDevices() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) return VerbsError("ibv_get_device_list", "-", errno);
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) out.emplace_back(ibv_get_device_name(list[i]));
  ibv_free_device_list(list);
  return out;
}

Result<Context> Context::Open(const std::string& device) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) return VerbsError("ibv_get_device_list", device, errno);
  Context c;
  c.name_ = device;
  for (int i = 0; i < n; ++i) {
    if (device == ibv_get_device_name(list[i])) {
      c.ctx_.reset(ibv_open_device(list[i]));
      int err = errno;
      ibv_free_device_list(list);
      if (!c.ctx_) return VerbsError("ibv_open_device", device, err);
      return c;
    }
  }
  ibv_free_device_list(list);
  return Status(Code::kNotFound, "no RDMA device '" + device + "' (ibv_get_device_list)");
}

Result<DeviceInfo> Context::Describe(uint8_t port) const {
  DeviceInfo d;
  d.name = name_;
  ibv_device_attr attr{};
  if (int rc = ibv_query_device(get(), &attr); rc != 0)
    return VerbsError("ibv_query_device", name_, rc);
  // The provider, from the device name's stem: "rxe1" -> rxe, "mlx5_0" -> mlx5.
  d.driver = name_;
  while (!d.driver.empty() &&
         (std::isdigit(static_cast<unsigned char>(d.driver.back())) != 0 || d.driver.back() == '_'))
    d.driver.pop_back();
  if (d.driver == "mlx") d.driver = "mlx5";
  d.transport = static_cast<uint32_t>(get()->device->transport_type);
  d.vendor_id = attr.vendor_id;
  d.vendor_part_id = attr.vendor_part_id;
  d.max_qp_wr = static_cast<uint32_t>(attr.max_qp_wr);
  d.max_qp_rd_atom = static_cast<uint32_t>(attr.max_qp_rd_atom);
  d.max_mr_size = attr.max_mr_size;
  d.max_mr = static_cast<uint32_t>(attr.max_mr);
  d.max_qp = static_cast<uint32_t>(attr.max_qp);
  ibv_port_attr pattr{};
  if (int rc = ibv_query_port(get(), port, &pattr); rc != 0)
    return VerbsError("ibv_query_port", name_, rc);
  PortInfo p;
  p.num = port;
  p.state = PortStateOf(pattr.state);
  p.link_layer = pattr.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand";
  p.active_mtu = MtuBytes(pattr.active_mtu);
  p.max_mtu = MtuBytes(pattr.max_mtu);
  for (int i = 0; i < pattr.gid_tbl_len; ++i) {
    ibv_gid_entry entry{};
    if (ibv_query_gid_ex(get(), port, static_cast<uint32_t>(i), &entry, 0) != 0) continue;
    Gid g;
    g.index = entry.gid_index;
    g.value = GidText(entry.gid);
    if (g.value == "0000:0000:0000:0000:0000:0000:0000:0000") continue;
    g.type = entry.gid_type == IBV_GID_TYPE_ROCE_V2   ? GidType::kRoceV2
             : entry.gid_type == IBV_GID_TYPE_ROCE_V1 ? GidType::kRoceV1
                                                      : GidType::kIb;
    char ifname[64] = {};
    if (entry.ndev_ifindex != 0 && if_indextoname(entry.ndev_ifindex, ifname) != nullptr) {
      g.netdev = ifname;
    }
    p.gids.push_back(std::move(g));
  }
  d.ports.push_back(std::move(p));
  return d;
}

Result<ProtectionDomain> ProtectionDomain::Create(const Context& ctx) {
  ProtectionDomain pd;
  pd.pd_.reset(ibv_alloc_pd(ctx.get()));
  if (!pd.pd_) return VerbsError("ibv_alloc_pd", ctx.name(), errno);
  return pd;
}

Result<CompletionChannel> CompletionChannel::Create(const Context& ctx) {
  CompletionChannel c;
  c.channel_.reset(ibv_create_comp_channel(ctx.get()));
  if (!c.channel_) return VerbsError("ibv_create_comp_channel", ctx.name(), errno);
  int flags = fcntl(c.fd(), F_GETFL);
  if (flags < 0 || fcntl(c.fd(), F_SETFL, flags | O_NONBLOCK) != 0)
    return VerbsError("fcntl(O_NONBLOCK) on the completion channel", ctx.name(), errno);
  return c;
}

Result<CompletionQueue> CompletionQueue::Create(const Context& ctx, int entries,
                                                const CompletionChannel* channel) {
  CompletionQueue cq;
  cq.cq_.reset(
      ibv_create_cq(ctx.get(), entries, nullptr, channel != nullptr ? channel->get() : nullptr, 0));
  if (!cq.cq_) return VerbsError("ibv_create_cq", ctx.name(), errno);
  if (channel != nullptr) {
    if (int rc = ibv_req_notify_cq(cq.get(), 0); rc != 0)
      return VerbsError("ibv_req_notify_cq", ctx.name(), rc);
  }
  return cq;
}

Result<Registration> Registration::Create(const ProtectionDomain& pd, void* addr, size_t length,
                                          int access, const std::string& device) {
  Registration r;
  r.mr_.reset(ibv_reg_mr(pd.get(), addr, length, access));
  if (!r.mr_) return VerbsError("ibv_reg_mr", device, errno);
  return r;
}

Result<QueuePair> QueuePair::Create(const ProtectionDomain& pd, const CompletionQueue& send_cq,
                                    const CompletionQueue& recv_cq, const Options& options,
                                    const std::string& device) {
  ibv_qp_init_attr init{};
  init.send_cq = send_cq.get();
  init.recv_cq = recv_cq.get();
  init.qp_type = options.type;
  init.cap.max_send_wr = options.max_send_wr;
  init.cap.max_recv_wr = options.max_recv_wr;
  init.cap.max_send_sge = options.max_send_sge;
  init.cap.max_recv_sge = options.max_recv_sge;
  init.cap.max_inline_data = options.max_inline;
  QueuePair qp;
  qp.qp_.reset(ibv_create_qp(pd.get(), &init));
  if (!qp.qp_) return VerbsError("ibv_create_qp", device, errno);
  qp.options_ = options;
  // What the device granted (at least what was asked).
  qp.options_.max_inline = init.cap.max_inline_data;
  qp.device_ = device;
  return qp;
}

Status QueuePair::Modify(QpState to, ibv_qp_attr& attr, int mask) {
  MCDMA_RETURN_IF_ERROR(CheckQpTransition(state_, to));
  if (int rc = ibv_modify_qp(get(), &attr, mask); rc != 0) {
    Status st = VerbsError("ibv_modify_qp", device_, rc);
    return Status(st.code(), st.message() + " moving QP " + std::to_string(qpn()) + " from " +
                                 QpStateName(state_) + " to " + QpStateName(to));
  }
  state_ = to;
  return Status::Ok();
}

Status QueuePair::ToInit(uint8_t port, int access) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = port;
  attr.qp_access_flags = static_cast<unsigned>(access);
  return Modify(QpState::kInit, attr,
                IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

Status QueuePair::ToRtr(const QpEndpoint& remote, uint32_t path_mtu, uint8_t port,
                        uint32_t gid_index) {
  if (remote.gid.size() != 16) return Status(Code::kInvalid, "remote GID is not 16 bytes");
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = static_cast<ibv_mtu>(MtuCode(path_mtu));
  attr.dest_qp_num = remote.qpn;
  attr.rq_psn = remote.psn;
  attr.max_dest_rd_atomic = options_.max_rd_atomic;
  attr.min_rnr_timer = 12;
  attr.ah_attr.is_global = 1;
  std::memcpy(attr.ah_attr.grh.dgid.raw, remote.gid.data(), 16);
  attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(gid_index);
  attr.ah_attr.grh.hop_limit = 64;
  attr.ah_attr.port_num = port;
  int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
  if (options_.type == IBV_QPT_RC) mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  return Modify(QpState::kRtr, attr, mask);
}

Status QueuePair::ToRts(uint32_t psn) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = psn;
  // 4.096 us * 2^16 = 268 ms per try, 7 tries: a peer that stops answering
  // fails requests after about 2 s (heartbeats usually notice first); a
  // busy responder (a loaded host, an emulated one) is not mistaken for a
  // dead one.
  attr.timeout = 16;
  // 6, not 7: Soft-RoCE reads 7 as "retry forever", so a vanished peer
  // would never complete a request.
  attr.retry_cnt = 6;
  attr.rnr_retry = 7;
  attr.max_rd_atomic = options_.max_rd_atomic;
  int mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
  if (options_.type == IBV_QPT_RC)
    mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
  return Modify(QpState::kRts, attr, mask);
}

Status QueuePair::ToError() {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  return Modify(QpState::kError, attr, IBV_QP_STATE);
}

uint32_t RandomPsn() {
  uint32_t v = 0;
  if (RAND_bytes(reinterpret_cast<unsigned char*>(&v), sizeof(v)) != 1) v = 0x123456;
  return v & 0xffffff;
}

}  // namespace mcdma::driver::verbs
