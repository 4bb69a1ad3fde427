// Runs inside the Soft-RoCE VM (tests/verbs/vm.sh): the verbs driver's
// owners and the model's decisions against two real rxe devices whose RoCE
// packets cross a veth pair. One RC queue pair on each device, connected to
// each other; RDMA WRITE, RDMA READ and SEND/RECV with every byte checked;
// then a WRITE past the end of the peer's registration must be refused by
// the peer's NIC. Prints one PASS/FAIL line per check; exits 0 iff all pass.
#include <sys/mman.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "driver/verbs/verbs_objects.hpp"

namespace v = mcdma::driver::verbs;

namespace {

constexpr size_t kBytes = 4 << 20;
constexpr size_t kChunk = 1 << 20;
int failures = 0;

void Check(bool ok, const std::string& what, const std::string& detail = {}) {
  std::printf("%s %s%s%s\n", ok ? "PASS" : "FAIL", what.c_str(), detail.empty() ? "" : ": ",
              detail.c_str());
  if (!ok) ++failures;
}

struct Side {
  std::string dev;
  std::string netdev;
  v::Context ctx;
  v::DeviceInfo info;
  v::Gid gid;
  v::ProtectionDomain pd;
  v::CompletionQueue cq;
  void* mem = nullptr;
  v::Registration mr;
  v::QueuePair qp;
  uint32_t psn = 0;
};

mcdma::Status Open(Side& s) {
  MCDMA_ASSIGN_OR_RETURN(s.ctx, v::Context::Open(s.dev));
  MCDMA_ASSIGN_OR_RETURN(s.info, s.ctx.Describe(1));
  MCDMA_ASSIGN_OR_RETURN(s.gid, v::ChooseGid(s.info.ports[0], {.netdev = s.netdev, .index = {}}));
  MCDMA_ASSIGN_OR_RETURN(s.pd, v::ProtectionDomain::Create(s.ctx));
  MCDMA_ASSIGN_OR_RETURN(s.cq, v::CompletionQueue::Create(s.ctx, 256));
  s.mem = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (s.mem == MAP_FAILED) return mcdma::Status(mcdma::Code::kNoMemory, "mmap");
  int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
  MCDMA_ASSIGN_OR_RETURN(s.mr, v::Registration::Create(s.pd, s.mem, kBytes, access, s.dev));
  MCDMA_ASSIGN_OR_RETURN(s.qp, v::QueuePair::Create(s.pd, s.cq, s.cq, {}, s.dev));
  s.psn = v::RandomPsn();
  return mcdma::Status::Ok();
}

std::string RawGid(const std::string& text) {
  std::string raw;
  for (size_t i = 0; i < text.size(); i += 5) {
    raw.push_back(static_cast<char>(std::stoul(text.substr(i, 2), nullptr, 16)));
    raw.push_back(static_cast<char>(std::stoul(text.substr(i + 2, 2), nullptr, 16)));
  }
  return raw;
}

// Waits up to 10 s for one completion on `s`; returns its status.
ibv_wc_status WaitOne(Side& s, uint64_t* wr_id = nullptr) {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  ibv_wc wc{};
  while (std::chrono::steady_clock::now() < until) {
    int n = ibv_poll_cq(s.cq.get(), 1, &wc);
    if (n > 0) {
      if (wr_id != nullptr) *wr_id = wc.wr_id;
      return wc.status;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return IBV_WC_GENERAL_ERR;
}

int Post(Side& s, ibv_wr_opcode op, uint64_t local_off, uint64_t remote_addr, uint32_t rkey,
         uint32_t len, uint64_t wr_id) {
  ibv_sge sge{reinterpret_cast<uint64_t>(s.mem) + local_off, len, s.mr.lkey()};
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = remote_addr;
  wr.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(s.qp.get(), &wr, &bad);
}

void Fill(void* p, size_t n, uint32_t seed) {
  auto* b = static_cast<uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>((i * 2654435761u + seed) >> 13);
}

}  // namespace

int main() {
  const char* devs = std::getenv("MCDMA_RXE_DEVS");
  std::istringstream in(devs != nullptr ? devs : "rxe1 rxe2");
  Side a;
  Side b;
  in >> a.dev >> b.dev;
  a.netdev = "veth0";
  b.netdev = "veth1";
  auto listed = v::ListDevices();
  Check(listed.ok() && listed->size() >= 2, "ibv_get_device_list lists the rxe devices");
  for (Side* s : {&a, &b}) {
    mcdma::Status st = Open(*s);
    Check(st.ok(), "open " + s->dev + ", describe it, choose its GID, PD/CQ/MR/QP", st.ToString());
    if (!st.ok()) return 1;
  }
  Check(a.info.ports[0].state == v::PortState::kActive, a.dev + " port 1 is ACTIVE");
  Check(a.gid.type == v::GidType::kRoceV2 && v::IsIpv4Mapped(a.gid.value),
        a.dev + " uses its RoCE v2 IPv4-mapped GID", "index " + std::to_string(a.gid.index));
  Check(v::DetectProfile(a.info) == v::kProfileLinuxRc, "rxe is detected as linux-rc");
  // linux-rc has no QP budget of its own: the device's max_qp is the budget.
  auto caps = v::ProfileCaps(v::kProfileLinuxRc, a.info);
  Check(a.info.max_qp > 0 && caps.ok() && caps->max_queue_pairs == a.info.max_qp,
        a.dev + " reports max_qp, linux-rc's QP budget", std::to_string(a.info.max_qp));
  auto mtu = v::NegotiateMtu(a.info.ports[0].active_mtu, b.info.ports[0].active_mtu);
  Check(mtu.ok(), "path MTU negotiated", mtu.ok() ? std::to_string(*mtu) : mtu.status().ToString());
  if (!mtu.ok()) return 1;
  v::QpEndpoint ea{a.qp.qpn(), a.psn, RawGid(a.gid.value), *mtu};
  v::QpEndpoint eb{b.qp.qpn(), b.psn, RawGid(b.gid.value), *mtu};
  int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
  mcdma::Status st = a.qp.ToInit(1, access);
  if (st.ok()) st = b.qp.ToInit(1, access);
  if (st.ok()) st = a.qp.ToRtr(eb, *mtu, 1, a.gid.index);
  if (st.ok()) st = b.qp.ToRtr(ea, *mtu, 1, b.gid.index);
  if (st.ok()) st = a.qp.ToRts(a.psn);
  if (st.ok()) st = b.qp.ToRts(b.psn);
  Check(st.ok(), "RC QPs RESET -> INIT -> RTR -> RTS on both ends", st.ToString());
  Check(!a.qp.ToRtr(eb, *mtu, 1, a.gid.index).ok(), "an RTS QP refuses to go back to RTR");
  if (!st.ok()) return 1;

  // WRITE 1 MiB chunks A -> B, 4 MiB in all.
  Fill(a.mem, kBytes, 7);
  std::memset(b.mem, 0, kBytes);
  bool ok = true;
  for (size_t off = 0; off < kBytes && ok; off += kChunk) {
    ok = Post(a, IBV_WR_RDMA_WRITE, off, b.mr.addr() + off, b.mr.rkey(), kChunk, off) == 0 &&
         WaitOne(a) == IBV_WC_SUCCESS;
  }
  Check(ok && std::memcmp(a.mem, b.mem, kBytes) == 0, "RDMA WRITE of 4 MiB A -> B, bytes verified");
  // READ B's region back into A (after scrambling A).
  Fill(b.mem, kBytes, 99);
  std::memset(a.mem, 0, kBytes);
  ok = true;
  for (size_t off = 0; off < kBytes && ok; off += kChunk) {
    ok = Post(a, IBV_WR_RDMA_READ, off, b.mr.addr() + off, b.mr.rkey(), kChunk, off) == 0 &&
         WaitOne(a) == IBV_WC_SUCCESS;
  }
  Check(ok && std::memcmp(a.mem, b.mem, kBytes) == 0, "RDMA READ of 4 MiB B -> A, bytes verified");
  // SEND 4 KiB into a posted RECV.
  ibv_sge rsge{reinterpret_cast<uint64_t>(b.mem), 4096, b.mr.lkey()};
  ibv_recv_wr rwr{};
  rwr.wr_id = 42;
  rwr.sg_list = &rsge;
  rwr.num_sge = 1;
  ibv_recv_wr* rbad = nullptr;
  Fill(a.mem, 4096, 5);
  std::memset(b.mem, 0, 4096);
  uint64_t got = 0;
  ok = ibv_post_recv(b.qp.get(), &rwr, &rbad) == 0 && Post(a, IBV_WR_SEND, 0, 0, 0, 4096, 1) == 0 &&
       WaitOne(a) == IBV_WC_SUCCESS && WaitOne(b, &got) == IBV_WC_SUCCESS && got == 42;
  Check(ok && std::memcmp(a.mem, b.mem, 4096) == 0, "SEND/RECV of 4 KiB, bytes verified");
  // A WRITE past the end of B's registration: B's NIC must refuse it.
  ibv_wc_status bad = IBV_WC_SUCCESS;
  if (Post(a, IBV_WR_RDMA_WRITE, 0, b.mr.addr() + kBytes - 512, b.mr.rkey(), 4096, 9) == 0) {
    bad = WaitOne(a);
  }
  Check(bad == IBV_WC_REM_ACCESS_ERR, "a WRITE past the peer's registration is refused",
        ibv_wc_status_str(bad));
  std::printf("%d failure(s)\n", failures);
  return failures == 0 ? 0 : 1;
}
