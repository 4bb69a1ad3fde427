// Runs inside the Soft-RoCE VM (tests/verbs/vm.sh): the verbs transport
// (driver/verbs/verbs_transport.hpp) between rxe1 and rxe2, whose packets
// cross a veth pair, once per device profile forced onto rxe:
//   * messaging: 300 messages each way, 0 B up to the largest the peer's
//     slots take, more than the receive ring holds (credits), every byte and
//     the order checked;
//   * one-sided WRITE and READ of 8 MiB in registrations no larger than the
//     profile allows, pipelined up to the profile's queue limit, verified;
//     the queue and READ high-water marks never exceed the profile;
//   * apple-tb5: no RDMA READ/WRITE on the wire — the same WRITE and READ
//     streamed over SENDs of one 4 KiB frame at most — and at most 100
//     registrations of at most 0xfa0000 bytes;
//   * a WRITE into a read-only export is refused by the peer (its NIC, or
//     its transport where the operation was streamed): PERMISSION_DENIED,
//     bytes unchanged; over RC the connection is then down (later posts
//     fail LINK_DOWN), a streamed refusal leaves it up;
//   * the peer's QP destroyed: the next SEND ends LINK_DOWN naming the retry
//     counter (the "crossed cable" symptom);
//   * apple-tb5's budget of 10 queue pairs: the 11th endpoint is refused
//     (NO_MEMORY, naming the budget), a failed Connect and a destroyed
//     endpoint or connection give theirs back;
//   * ListActivePorts lists rxe1 and rxe2 port 1;
//   * last, since it takes the wire away: veth0 down (rxe1 sits on it) shows
//     as rxe1's port not active, with a reason, within seconds, and takes
//     its connection down; veth0 up again shows as active, and after the
//     routes and neighbour entries guest-init made are put back a new
//     connection carries a message.
// Prints one PASS/FAIL line per check; exits 0 iff all pass.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "driver/verbs/verbs_internal.hpp"

namespace d = mcdma::driver;
namespace v = mcdma::driver::verbs;
using mcdma::Code;

namespace {

int failures = 0;

void Check(bool ok, const std::string& what, const std::string& detail = {}) {
  std::printf("%s %s%s%s\n", ok ? "PASS" : "FAIL", what.c_str(), detail.empty() ? "" : ": ",
              detail.c_str());
  std::fflush(stdout);
  if (!ok) ++failures;
}

struct Memory {
  v::AlignedBytes bytes;
  std::vector<std::unique_ptr<d::MemoryRegion>> regions;  // pieces, in order
  uint64_t piece = 0;
};

// `bytes` of memory registered in pieces of at most the device's limit.
mcdma::Result<Memory> Allocate(d::Device& dev, uint64_t bytes, uint32_t access) {
  Memory m;
  m.bytes = v::AllocateAligned(bytes);
  if (!m.bytes) return mcdma::Status(Code::kNoMemory, "allocate");
  m.piece = std::min<uint64_t>(bytes, dev.caps().max_registration_bytes / 4096 * 4096);
  for (uint64_t off = 0; off < bytes; off += m.piece) {
    MCDMA_ASSIGN_OR_RETURN(
        auto r, dev.Register(m.bytes.get() + off, std::min(m.piece, bytes - off), access));
    m.regions.push_back(std::move(r));
  }
  return m;
}

struct Pair {
  std::unique_ptr<v::VerbsDevice> a, b;
  std::unique_ptr<d::Connection> ca, cb;
};

mcdma::Result<Pair> Connect(const std::string& profile) {
  Pair p;
  MCDMA_ASSIGN_OR_RETURN(p.a, v::VerbsDevice::Open({.device = "rxe1",
                                                    .port = 1,
                                                    .interface = "veth0",
                                                    .gid_index = -1,
                                                    .profile = profile}));
  MCDMA_ASSIGN_OR_RETURN(p.b, v::VerbsDevice::Open({.device = "rxe2",
                                                    .port = 1,
                                                    .interface = "veth1",
                                                    .gid_index = -1,
                                                    .profile = profile}));
  MCDMA_ASSIGN_OR_RETURN(auto ea, p.a->CreateEndpoint());
  MCDMA_ASSIGN_OR_RETURN(auto eb, p.b->CreateEndpoint());
  std::string ia = ea->LocalInfo(), ib = eb->LocalInfo();
  MCDMA_ASSIGN_OR_RETURN(p.ca, ea->Connect(ib));
  MCDMA_ASSIGN_OR_RETURN(p.cb, eb->Connect(ia));
  return p;
}

// Polls both connections until `done` or 20 s; returns the completions of each.
template <typename Done>
bool PollUntil(Pair& p, std::vector<d::WorkCompletion>& wa, std::vector<d::WorkCompletion>& wb,
               Done done) {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  d::WorkCompletion buf[32];
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    size_t n = p.ca->Poll(buf);
    wa.insert(wa.end(), buf, buf + n);
    size_t m = p.cb->Poll(buf);
    wb.insert(wb.end(), buf, buf + m);
    if (n == 0 && m == 0) std::this_thread::yield();
  }
  return true;
}

uint8_t PatternByte(uint64_t seq, uint64_t i) {
  return static_cast<uint8_t>(seq * 131 + i * 7 + 1);
}

// 300 messages each way of growing sizes through 8 posted RECVs per side.
void Messaging(Pair& p, const std::string& tag) {
  const uint64_t max = p.ca->caps().max_message_bytes;
  Check(max > 0 && max == p.cb->caps().max_message_bytes, tag + " max_message_bytes agreed",
        std::to_string(max));
  constexpr uint32_t kRecvs = 8;
  constexpr int kMessages = 300;
  auto ma = Allocate(*p.a, uint64_t{2} * kRecvs * max + 4096, 0);
  auto mb = Allocate(*p.b, uint64_t{2} * kRecvs * max + 4096, 0);
  if (!ma.ok() || !mb.ok() || ma->regions.size() != 1 || mb->regions.size() != 1) {
    Check(false, tag + " messaging buffers",
          ma.ok() ? mb.status().message() : ma.status().message());
    return;
  }
  struct End {
    d::Connection* conn = nullptr;
    Memory* mem = nullptr;
    int sent = 0, received = 0, send_done = 0;
    std::deque<uint32_t> free_send;
    bool bad = false;
    std::string why;
  };
  End ends[2];
  ends[0].conn = p.ca.get();
  ends[0].mem = &*ma;
  ends[1].conn = p.cb.get();
  ends[1].mem = &*mb;
  auto size_of = [&](int seq) {
    return seq == 0 ? uint64_t{0} : (static_cast<uint64_t>(seq) * 977) % (max + 1);
  };
  for (End& e : ends) {
    for (uint32_t i = 0; i < kRecvs; ++i) {
      mcdma::Status st = e.conn->PostRecv(i, {e.mem->regions[0].get(), i * max, max});
      if (!st.ok()) Check(false, tag + " PostRecv", st.message());
      e.free_send.push_back(kRecvs + i);
    }
  }
  // Oversized SEND: refused at post time.
  mcdma::Status big = ends[0].conn->PostSend(999, {ma->regions[0].get(), 0, max + 1});
  Check(big.code() == Code::kInvalid, tag + " SEND larger than the peer's slot refused",
        big.message());
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  d::WorkCompletion wcs[32];
  while ((ends[0].received < kMessages || ends[1].received < kMessages ||
          ends[0].send_done < kMessages || ends[1].send_done < kMessages) &&
         std::chrono::steady_clock::now() < until && !ends[0].bad && !ends[1].bad) {
    for (int side = 0; side < 2; ++side) {
      End& e = ends[side];
      while (e.sent < kMessages && !e.free_send.empty()) {
        uint32_t slot = e.free_send.front();
        uint64_t n = size_of(e.sent);
        std::byte* at = e.mem->bytes.get() + uint64_t{slot} * max;
        for (uint64_t i = 0; i < n; ++i) at[i] = static_cast<std::byte>(PatternByte(e.sent, i));
        mcdma::Status st = e.conn->PostSend(1000 + slot, {e.mem->regions[0].get(), slot * max, n});
        if (st.code() == Code::kBusy) break;
        if (!st.ok()) {
          e.bad = true;
          e.why = "PostSend: " + st.message();
          break;
        }
        e.free_send.pop_front();
        ++e.sent;
      }
      size_t n = e.conn->Poll(wcs);
      for (size_t k = 0; k < n; ++k) {
        const d::WorkCompletion& wc = wcs[k];
        if (wc.code != Code::kOk) {
          e.bad = true;
          e.why = "completion failed: " + wc.detail;
          continue;
        }
        if (wc.op == d::WorkOp::kSend) {
          e.free_send.push_back(static_cast<uint32_t>(wc.wr_id - 1000));
          ++e.send_done;
          continue;
        }
        uint32_t slot = static_cast<uint32_t>(wc.wr_id);
        uint64_t want = size_of(e.received);
        const std::byte* got = e.mem->bytes.get() + uint64_t{slot} * max;
        bool same = wc.byte_len == want;
        for (uint64_t i = 0; same && i < want; ++i)
          same = got[i] == static_cast<std::byte>(PatternByte(e.received, i));
        if (!same) {
          e.bad = true;
          e.why = "message " + std::to_string(e.received) + " differs (" +
                  std::to_string(wc.byte_len) + " bytes, expected " + std::to_string(want) + ")";
        }
        ++e.received;
        mcdma::Status st = e.conn->PostRecv(slot, {e.mem->regions[0].get(), slot * max, max});
        if (!st.ok()) {
          e.bad = true;
          e.why = "re-PostRecv: " + st.message();
        }
      }
    }
    std::this_thread::yield();
  }
  for (int side = 0; side < 2; ++side) {
    const End& e = ends[side];
    Check(!e.bad && e.received == kMessages && e.send_done == kMessages,
          tag + (side == 0 ? " rxe2 -> rxe1" : " rxe1 -> rxe2") + ": 300 messages, bytes and order",
          e.bad ? e.why
                : "received " + std::to_string(e.received) + ", sends done " +
                      std::to_string(e.send_done));
  }
}

// WRITE then READ 8 MiB between A's memory and B's exported memory.
void OneSided(Pair& p, const std::string& tag) {
  constexpr uint64_t kBytes = 8ull << 20;
  auto la = Allocate(*p.a, kBytes, 0);
  auto rb = Allocate(*p.b, kBytes, d::kAccessRemoteRead | d::kAccessRemoteWrite);
  if (!la.ok() || !rb.ok()) {
    Check(false, tag + " one-sided buffers",
          la.ok() ? rb.status().message() : la.status().message());
    return;
  }
  const d::Caps& caps = p.ca->caps();
  for (uint64_t i = 0; i < kBytes; ++i) la->bytes.get()[i] = static_cast<std::byte>(i * 13 + 5);
  auto run = [&](bool read) -> std::string {
    uint64_t chunk =
        std::min<uint64_t>({uint64_t{1} << 20, read ? caps.max_read_bytes : caps.max_transfer_bytes,
                            la->piece, rb->piece});
    uint64_t posted = 0;
    uint64_t done = 0;
    uint32_t inflight = 0;
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    d::WorkCompletion wcs[32];
    while (done < kBytes) {
      if (std::chrono::steady_clock::now() > until) return "timed out";
      while (posted < kBytes && inflight < caps.max_outstanding) {
        uint64_t n = std::min({chunk, kBytes - posted, la->piece - posted % la->piece,
                               rb->piece - posted % rb->piece});
        const d::MemoryRegion* lr = la->regions[posted / la->piece].get();
        const d::MemoryRegion* rr = rb->regions[posted / rb->piece].get();
        d::LocalSlice local{lr, posted % la->piece, n};
        d::RemoteSlice remote{rr->RemoteAddr(posted % rb->piece), rr->rkey()};
        mcdma::Status st =
            read ? p.ca->PostRead(n, local, remote) : p.ca->PostWrite(n, local, remote);
        if (st.code() == Code::kBusy) break;
        if (!st.ok()) return st.message();
        posted += n;
        ++inflight;
      }
      size_t k = p.ca->Poll(wcs);
      p.cb->Poll(std::span<d::WorkCompletion>(wcs + k, 0));
      for (size_t i = 0; i < k; ++i) {
        if (wcs[i].code != Code::kOk) return "completion failed: " + wcs[i].detail;
        done += wcs[i].wr_id;
        --inflight;
      }
      if (k == 0) std::this_thread::yield();
    }
    return "";
  };
  std::string w = run(false);
  bool same = w.empty() && std::memcmp(la->bytes.get(), rb->bytes.get(), kBytes) == 0;
  Check(same, tag + " WRITE 8 MiB into the peer's registrations, verified in its memory", w);
  for (uint64_t i = 0; i < kBytes; ++i) rb->bytes.get()[i] = static_cast<std::byte>(i * 29 + 3);
  std::string r = run(true);
  same = r.empty() && std::memcmp(la->bytes.get(), rb->bytes.get(), kBytes) == 0;
  Check(same, tag + " READ 8 MiB back from the peer, verified", r);
}

void Limits(Pair& p, const std::string& profile, const std::string& tag) {
  v::VerbsHighWater hw = p.a->high_water();
  const d::Caps& dev = p.a->caps();
  std::string detail = "send queue " + std::to_string(hw.send_queue) + " (limit " +
                       std::to_string(dev.max_outstanding) + "), READs " +
                       std::to_string(hw.reads) + ", largest READ " +
                       std::to_string(hw.largest_read);
  bool ok = hw.send_queue <= dev.max_outstanding && hw.send_queue > 0;
  if (profile == v::kProfileMcdmaCx5) {
    ok = ok && dev.max_outstanding == 31 && hw.reads == 1 && hw.largest_read <= (2u << 20) &&
         hw.largest_read > 0;
  }
  Check(ok, tag + " queue and READ limits honoured", detail);
  if (profile == v::kProfileAppleTb5) {
    Check(hw.largest_read == 0 && hw.largest_send > 0 && hw.largest_send <= 4096,
          tag + " no RDMA READ posted, every SEND within one 4 KiB frame",
          "largest SEND " + std::to_string(hw.largest_send) + " bytes");
    Memory m;
    m.bytes = v::AllocateAligned(0xfa0000 + 4096);
    auto over = p.a->Register(m.bytes.get(), 0xfa0000 + 1, 0);
    Check(!over.ok() && over.status().code() == Code::kInvalid,
          tag + " registration over 0xfa0000 bytes refused",
          over.ok() ? "accepted" : over.status().message());
    std::vector<std::unique_ptr<d::MemoryRegion>> many;
    mcdma::Status last;
    for (int i = 0; i < 120; ++i) {
      auto r = p.a->Register(m.bytes.get() + i * 4096 % 0xfa0000, 4096, 0);
      if (!r.ok()) {
        last = r.status();
        break;
      }
      many.push_back(std::move(*r));
    }
    // The connection's ring and headers hold 2 of the 100.
    Check(last.code() == Code::kNoMemory && many.size() == 98, tag + " at most 100 registrations",
          std::to_string(many.size()) + " more taken, then " + last.message());
  }
}

// A WRITE into a read-only registration: the peer's NIC refuses it.
void BadAccess(Pair& p, const std::string& tag) {
  auto la = Allocate(*p.a, 4096, 0);
  auto rb = Allocate(*p.b, 4096, d::kAccessRemoteRead);
  if (!la.ok() || !rb.ok()) return Check(false, tag + " bad-access buffers");
  std::memset(rb->bytes.get(), 0x5a, 4096);
  const d::MemoryRegion* rr = rb->regions[0].get();
  mcdma::Status st =
      p.ca->PostWrite(7, {la->regions[0].get(), 0, 4096}, {rr->RemoteAddr(0), rr->rkey()});
  std::vector<d::WorkCompletion> wa, wb;
  bool got = st.ok() && PollUntil(p, wa, wb, [&] { return !wa.empty(); });
  bool untouched = true;
  for (int i = 0; i < 4096; ++i) untouched = untouched && rb->bytes.get()[i] == std::byte{0x5a};
  Check(got && wa[0].code == Code::kPermissionDenied && untouched,
        tag + " WRITE into a read-only registration refused by the peer, bytes unchanged",
        got ? wa[0].detail : st.message());
  mcdma::Status after = p.ca->PostSend(8, {la->regions[0].get(), 0, 16});
  if (p.ca->caps().one_sided) {
    Check(after.code() == Code::kLinkDown, tag + " the connection is down afterwards",
          after.message());
  } else {
    Check(after.ok(), tag + " a streamed refusal leaves the connection up", after.message());
  }
}

// The peer's QP vanishes: our next SEND exhausts the transport retries.
void PeerGone(Pair& p, const std::string& tag) {
  auto la = Allocate(*p.a, 4096, 0);
  if (!la.ok()) return Check(false, tag + " peer-gone buffer");
  // Let both ends hear each other's HELLO first: a SEND waits for credit.
  std::vector<d::WorkCompletion> ha, hb;
  auto settle = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  PollUntil(p, ha, hb, [&] { return std::chrono::steady_clock::now() > settle; });
  p.cb.reset();
  auto start = std::chrono::steady_clock::now();
  mcdma::Status st = p.ca->PostSend(9, {la->regions[0].get(), 0, 64});
  std::vector<d::WorkCompletion> wa, wb;
  auto until = start + std::chrono::seconds(30);
  d::WorkCompletion buf[8];
  while (st.ok() && wa.empty() && std::chrono::steady_clock::now() < until) {
    size_t n = p.ca->Poll(buf);
    wa.insert(wa.end(), buf, buf + n);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  bool ok = st.ok() && !wa.empty() && wa[0].code == Code::kLinkDown &&
            wa[0].detail.find("retry") != std::string::npos;
  Check(ok, tag + " peer QP gone: SEND ends LINK_DOWN naming the retries",
        (wa.empty() ? st.message() : wa[0].detail) + " after " + std::to_string(s) + " s");
}

void RunProfile(const std::string& profile) {
  std::string tag = "[" + profile + "]";
  auto p = Connect(profile);
  Check(p.ok(), tag + " two devices opened and connected", p.ok() ? "" : p.status().message());
  if (!p.ok()) return;
  Check(p->ca->caps().profile == profile, tag + " profile in force", p->ca->caps().profile);
  Messaging(*p, tag);
  OneSided(*p, tag);
  Limits(*p, profile, tag);
  BadAccess(*p, tag);
  auto q = Connect(profile);
  if (q.ok() && profile != v::kProfileAppleTb5) PeerGone(*q, tag);
}

// apple-tb5 on rxe1: 10 queue pairs at most, each given back however its
// endpoint ends.
void QueuePairBudget() {
  const std::string tag = "[apple-tb5 QP budget]";
  auto dev = v::VerbsDevice::Open(
      {.device = "rxe1", .interface = "veth0", .profile = v::kProfileAppleTb5});
  if (!dev.ok()) return Check(false, tag + " rxe1 opened", dev.status().message());
  v::VerbsDevice& d = **dev;
  Check(d.caps().max_queue_pairs == 10, tag + " caps().max_queue_pairs is 10",
        std::to_string(d.caps().max_queue_pairs));
  std::vector<std::unique_ptr<d::Endpoint>> eps;
  mcdma::Status refused;
  for (int i = 0; i < 12 && refused.ok(); ++i) {
    auto ep = d.CreateEndpoint();
    if (ep.ok()) {
      eps.push_back(std::move(*ep));
    } else {
      refused = ep.status();
    }
  }
  Check(eps.size() == 10 && refused.code() == Code::kNoMemory &&
            refused.message().find("budget of 10 queue pairs") != std::string::npos &&
            refused.message().find("apple-tb5") != std::string::npos,
        tag + " 10 endpoints, the 11th refused with NO_MEMORY naming the budget",
        std::to_string(eps.size()) + " created, then " + refused.ToString());
  // Each endpoint holds its receive ring and its headers.
  Check(d.queue_pairs() == 10 && d.registrations() == 20,
        tag + " queue_pairs() and registrations() count them",
        std::to_string(d.queue_pairs()) + " QPs, " + std::to_string(d.registrations()) +
            " registrations");
  eps.pop_back();
  auto again = d.CreateEndpoint();
  Check(again.ok() && d.queue_pairs() == 10, tag + " one endpoint destroyed: the next one succeeds",
        again.ok() ? std::to_string(d.queue_pairs()) + " in use" : again.status().message());
  if (again.ok()) eps.push_back(std::move(*again));
  // Connect consumes the endpoint even when it fails: its QP goes with it.
  auto bad = eps.back()->Connect("not an endpoint");
  eps.pop_back();
  Check(!bad.ok() && d.queue_pairs() == 9 && d.registrations() == 18,
        tag + " a failed Connect gives its QP and registrations back",
        std::to_string(d.queue_pairs()) + " QPs, " + std::to_string(d.registrations()) +
            " registrations");
  // A connection holds its endpoint's QP until it is destroyed.
  auto peer = v::VerbsDevice::Open(
      {.device = "rxe2", .interface = "veth1", .profile = v::kProfileAppleTb5});
  if (!peer.ok()) return Check(false, tag + " rxe2 opened", peer.status().message());
  auto far = (*peer)->CreateEndpoint();
  if (!far.ok()) return Check(false, tag + " rxe2 endpoint", far.status().message());
  std::string far_info = (*far)->LocalInfo();
  std::string near_info = eps.back()->LocalInfo();
  auto conn = eps.back()->Connect(far_info);
  eps.pop_back();
  auto far_conn = (*far)->Connect(near_info);
  uint32_t connected = d.queue_pairs();
  Check(conn.ok() && far_conn.ok() && connected == 9 && (*peer)->queue_pairs() == 1,
        tag + " a connection keeps its QP counted",
        conn.ok() ? std::to_string(connected) + " in use" : conn.status().message());
  if (conn.ok()) conn->reset();
  Check(d.queue_pairs() == 8, tag + " a destroyed connection gives its QP back",
        std::to_string(d.queue_pairs()) + " in use");
  eps.clear();
  Check(d.queue_pairs() == 0 && d.registrations() == 0,
        tag + " nothing left counted once everything is destroyed",
        std::to_string(d.queue_pairs()) + " QPs, " + std::to_string(d.registrations()) +
            " registrations");
}

std::string PortsText(const std::vector<v::PortRef>& ports) {
  std::string out;
  for (const v::PortRef& p : ports)
    out += (out.empty() ? "" : ", ") + p.device + ":" + std::to_string(p.port);
  return out.empty() ? "none" : out;
}

bool Listed(const std::vector<v::PortRef>& ports, const std::string& device) {
  for (const v::PortRef& p : ports)
    if (p.device == device && p.port == 1) return true;
  return false;
}

void ActivePorts() {
  auto ports = v::ListActivePorts();
  if (!ports.ok()) return Check(false, "ListActivePorts", ports.status().message());
  bool ordered = ports->size() >= 2 && (*ports)[0].device == "rxe1" && (*ports)[0].port == 1 &&
                 (*ports)[1].device == "rxe2" && (*ports)[1].port == 1;
  Check(ordered, "ListActivePorts lists rxe1 port 1 then rxe2 port 1", PortsText(*ports));
}

bool Shell(const std::string& command) {
  int rc = std::system(command.c_str());
  if (rc != 0) std::printf("  (`%s` exited %d)\n", command.c_str(), rc);
  return rc == 0;
}

// Polls `cond` every 10 ms for up to 15 s after `start`; the seconds from
// `start` until it held, or -1.
template <typename Cond>
double WaitFor(Cond cond,
               std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now()) {
  while (!cond()) {
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(15)) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f s", s);
  return s < 0 ? "not within 15 s" : buf;
}

// One 64-byte message rxe1 -> rxe2 over `p`, bytes checked.
bool OneMessage(Pair& p, std::string& why) {
  auto ma = Allocate(*p.a, 4096, 0);
  auto mb = Allocate(*p.b, 4096, 0);
  if (!ma.ok() || !mb.ok()) {
    why = "buffers";
    return false;
  }
  for (int i = 0; i < 64; ++i) ma->bytes.get()[i] = static_cast<std::byte>(i + 1);
  mcdma::Status st = p.cb->PostRecv(1, {mb->regions[0].get(), 0, 4096});
  if (st.ok()) st = p.ca->PostSend(2, {ma->regions[0].get(), 0, 64});
  if (!st.ok()) {
    why = st.message();
    return false;
  }
  std::vector<d::WorkCompletion> wa, wb;
  if (!PollUntil(p, wa, wb, [&] { return !wa.empty() && !wb.empty(); })) {
    why = "no completion within 20 s";
    return false;
  }
  if (wa[0].code != Code::kOk || wb[0].code != Code::kOk || wb[0].byte_len != 64) {
    why = wa[0].detail + " / " + wb[0].detail;
    return false;
  }
  if (std::memcmp(ma->bytes.get(), mb->bytes.get(), 64) != 0) {
    why = "bytes differ";
    return false;
  }
  return true;
}

// veth0 down and up again, watched through rxe1's port. Runs last: taking a
// veth end down drops the routes and neighbour entries guest-init made on
// it, which are put back here so the steps after this binary still work.
void PortGoesDownAndComesBack() {
  const std::string tag = "[port state]";
  if (geteuid() != 0) {
    std::printf("SKIP %s needs root to take veth0 down\n", tag.c_str());
    return;
  }
  auto p = Connect(v::kProfileLinuxRc);
  if (!p.ok()) return Check(false, tag + " rxe1/rxe2 connected", p.status().message());
  Check(p->a->port_active() && p->a->port_failure().empty(), tag + " rxe1 port 1 active at open",
        p->a->port_failure());
  auto down_at = std::chrono::steady_clock::now();
  if (!Shell("ip link set veth0 down")) return Check(false, tag + " ip link set veth0 down");
  double down = WaitFor([&] { return !p->a->port_active(); }, down_at);
  std::string failure = p->a->port_failure();
  Check(down >= 0 && !failure.empty(), tag + " veth0 down: rxe1's port is not active",
        "after " + Seconds(down) + ": " + failure);
  // rxe sends PORT_ERR as it takes the port down; the read-back may get
  // there first, the event's meaning must win once it is in.
  double named = WaitFor(
      [&] { return p->a->port_failure().find("port went down") != std::string::npos; }, down_at);
  Check(named >= 0, tag + " port_failure() gives the PORT_ERR event's meaning",
        "after " + Seconds(named) + ": " + p->a->port_failure());
  auto ports = v::ListActivePorts();
  Check(ports.ok() && !Listed(*ports, "rxe1"), tag + " ListActivePorts leaves rxe1 out",
        ports.ok() ? PortsText(*ports) : ports.status().message());
  d::WorkCompletion wcs[8];
  (void)p->ca->Poll(wcs);
  auto la = Allocate(*p->a, 4096, 0);
  mcdma::Status st = la.ok() ? p->ca->PostSend(1, {la->regions[0].get(), 0, 16})
                             : mcdma::Status(Code::kNoMemory, "buffer");
  Check(st.code() == Code::kLinkDown && st.message().find("port") != std::string::npos,
        tag + " the connection on rxe1 is down, naming the port", st.ToString());
  auto up_at = std::chrono::steady_clock::now();
  const bool up_ok =
      Shell("ip link set veth0 up") &&
      Shell("ip route replace 10.0.1.2/32 dev veth0 src 10.0.1.1 table 10") &&
      Shell("ip route replace 10.0.1.1/32 dev veth1 src 10.0.1.2 table 11") &&
      Shell(
          "ip neigh replace 10.0.1.2 lladdr \"$(cat /sys/class/net/veth1/address)\" dev veth0 "
          "nud permanent") &&
      Shell(
          "ip neigh replace 10.0.1.1 lladdr \"$(cat /sys/class/net/veth0/address)\" dev veth1 "
          "nud permanent");
  double up = WaitFor([&] { return p->a->port_active(); }, up_at);
  Check(up_ok && up >= 0 && p->a->port_failure().empty(),
        tag + " veth0 up: rxe1's port is active again, no failure",
        "after " + Seconds(up) + (p->a->port_failure().empty() ? "" : ": " + p->a->port_failure()));
  p->ca.reset();
  p->cb.reset();
  // A new connection over the restored wire (the RoCE GID may take a moment
  // to come back with the interface).
  std::string why = "never connected";
  bool carried = false;
  double took = WaitFor([&] {
    auto q = Connect(v::kProfileLinuxRc);
    if (!q.ok()) {
      why = q.status().message();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      return false;
    }
    carried = OneMessage(*q, why);
    return true;
  });
  Check(took >= 0 && carried, tag + " after veth0 up: a new connection carries a message",
        carried ? "after " + Seconds(took) : why);
}

int Run(int argc, char** argv) {
  std::vector<std::string> profiles = {v::kProfileLinuxRc, v::kProfileMcdmaCx5,
                                       v::kProfileAppleTb5};
  if (argc > 1) profiles.assign(argv + 1, argv + argc);
  for (const std::string& profile : profiles) RunProfile(profile);
  // Profiles that cannot meet: RC against UC.
  auto a = v::VerbsDevice::Open({.device = "rxe1", .interface = "veth0", .profile = "linux-rc"});
  auto b = v::VerbsDevice::Open({.device = "rxe2", .interface = "veth1", .profile = "apple-tb5"});
  if (a.ok() && b.ok()) {
    auto ea = (*a)->CreateEndpoint();
    auto eb = (*b)->CreateEndpoint();
    if (ea.ok() && eb.ok()) {
      auto c = (*ea)->Connect((*eb)->LocalInfo());
      Check(!c.ok() && c.status().message().find("force the same profile") != std::string::npos,
            "RC end refuses a UC peer, saying what to change",
            c.ok() ? "connected" : c.status().message());
    }
  }
  QueuePairBudget();
  ActivePorts();
  PortGoesDownAndComesBack();
  std::printf("%s: %d failure(s)\n", failures == 0 ? "PASS" : "FAIL", failures);
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
}
