// Link wire messages (daemon/src/engine/link_wire.hpp) as a peer daemon sends
// them, through the engine's receive path: each input is a sequence of
// fragments that a peer SENDs over an installed link into the engine's
// receive slots, where the engine decodes, reassembles
// (engine/reassembler.cpp) and dispatches them (calls into a served service,
// replies, revokes, echoes: engine_link.cpp, engine_calls.cpp).
//
// The link runs on a loop device standing in for tcp, with the harness
// holding the peer's end; a session here serves a service and exports a
// buffer. Every decoded fragment is also re-encoded and decoded again (the
// two must agree).
//
// Input: fragments, each a u16 length and that many bytes. Unless the
// input starts with 0xff, a fragment's target and id below 16 name this
// host's objects (1 the service, 2 the export, 3 the session), so inputs
// do not depend on the engine's id counter.
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "engine/link_wire.hpp"
#include "fuzz_engine.hpp"
#include "fuzz_support.hpp"

namespace mcdma::fuzz {
namespace {

constexpr size_t kMaxFragments = 64;
constexpr uint32_t kSlotBytes = 4096;  // FuzzEngine's link_slot_bytes
constexpr uint32_t kPeerRecvs = 16;
constexpr size_t kIdSlots = 16;

void CheckRoundTrip(std::span<const uint8_t> bytes) {
  std::string why;
  auto* in = reinterpret_cast<const std::byte*>(bytes.data());
  std::optional<daemon::link_wire::Header> h = daemon::link_wire::Decode(in, bytes.size(), &why);
  if (!h) {
    if (why.empty()) std::abort();  // a refusal always says why
    return;
  }
  std::vector<std::byte> again(bytes.size());
  daemon::link_wire::Encode(*h, again.data());
  std::memcpy(again.data() + daemon::link_wire::kHeaderBytes, in + daemon::link_wire::kHeaderBytes,
              bytes.size() - daemon::link_wire::kHeaderBytes);
  if (std::memcmp(again.data(), in, bytes.size()) != 0) std::abort();  // encoding is canonical
}

struct Peer {
  std::unique_ptr<driver::Endpoint> endpoint;
  std::unique_ptr<driver::Connection> conn;
  std::vector<std::byte> memory = std::vector<std::byte>((kPeerRecvs + 1) * kSlotBytes);
  std::unique_ptr<driver::MemoryRegion> region;
  uint64_t link = 0;
  uint64_t session = 0;
  std::vector<uint64_t> ids = std::vector<uint64_t>(kIdSlots, 0);
};

// Engine thread: reaps the peer's completions and re-posts its RECVs.
void Drain(Peer& p) {
  driver::WorkCompletion wcs[32];
  size_t n;
  while ((n = p.conn->Poll(wcs)) > 0) {
    for (size_t i = 0; i < n; ++i) {
      if (wcs[i].op == driver::WorkOp::kRecv && wcs[i].code == Code::kOk) {
        uint64_t slot = wcs[i].wr_id;
        (void)p.conn->PostRecv(slot, {p.region.get(), slot * kSlotBytes, kSlotBytes});
      }
    }
  }
}

// Engine thread: the session with its service and export, and the link.
bool Setup(daemon::Engine& engine, driver::Device& device, Peer& p) {
  static uint64_t generation = 0;
  ++generation;
  daemon::HelloInfo hello;
  hello.app_name = "fuzz-link";
  hello.pid = static_cast<uint32_t>(getpid());
  hello.uid = static_cast<uint32_t>(getuid());
  auto opened = engine.OpenSession(hello);
  if (!opened.ok()) return false;
  p.session = opened->session_id;
  p.ids[3] = p.session;
  (void)engine.Mapped(p.session, opened->mailbox_segment);
  auto svc = engine.Serve(p.session, "fuzz.link.svc." + std::to_string(generation));
  auto buf = engine.Alloc(p.session, 8192);
  if (!svc.ok() || !buf.ok()) return false;
  (void)engine.Mapped(p.session, buf->segment);
  p.ids[1] = *svc;
  daemon::ExportSpec spec;
  spec.name = "fuzz.link.exp." + std::to_string(generation);
  spec.buffer_id = buf->buffer_id;
  spec.allow_read = true;
  auto exp = engine.Export(p.session, spec);
  if (!exp.ok()) return false;
  p.ids[2] = *exp;

  auto ours = engine.CreateLinkEndpoint(daemon::Transport::kTcp);
  auto theirs = device.CreateEndpoint();
  if (!ours.ok() || !theirs.ok()) return false;
  p.endpoint = std::move(*theirs);
  auto conn = (*ours)->Connect(p.endpoint->LocalInfo());
  auto peer_conn = p.endpoint->Connect((*ours)->LocalInfo());
  if (!conn.ok() || !peer_conn.ok()) return false;
  p.conn = std::move(*peer_conn);
  auto region = device.Register(p.memory.data(), p.memory.size(), driver::kAccessLocal);
  if (!region.ok()) return false;
  p.region = std::move(*region);
  for (uint32_t i = 0; i < kPeerRecvs; ++i) {
    if (!p.conn->PostRecv(i, {p.region.get(), uint64_t{i} * kSlotBytes, kSlotBytes}).ok())
      return false;
  }
  daemon::LinkSpec link{"fuzz-peer", daemon::LinkOrigin::kOut, generation, "fuzz-instance",
                        0,           daemon::Transport::kTcp};
  auto id = engine.InstallLink(link, std::move(*conn));
  if (!id.ok()) return false;
  p.link = *id;
  return true;
}

void PutLe(std::byte* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
}
uint64_t GetLe(const std::byte* in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v |= static_cast<uint64_t>(std::to_integer<uint8_t>(in[i])) << (8 * i);
  return v;
}

}  // namespace
}  // namespace mcdma::fuzz

using namespace mcdma;
using namespace mcdma::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzEngine& fe = FuzzEngine::Get();
  daemon::Engine& engine = fe.engine();
  Input in(data, size);
  bool raw_ids = size > 0 && data[0] == 0xff;
  if (raw_ids) in.U8();

  Peer p;
  auto ok = engine.Run([&] { return Setup(engine, fe.link_device(), p); });
  if (!ok || !*ok) std::abort();

  std::byte* send_area = p.memory.data() + kPeerRecvs * kSlotBytes;
  for (size_t i = 0; i < kMaxFragments && in.left() >= 2; ++i) {
    auto frag = in.Take(in.U16());
    CheckRoundTrip(frag);
    size_t len = std::min<size_t>(frag.size(), kSlotBytes);
    std::memcpy(send_area, frag.data(), len);
    if (!raw_ids && len >= daemon::link_wire::kHeaderBytes) {
      for (size_t off : {size_t{16}, size_t{24}}) {  // id, target
        uint64_t v = GetLe(send_area + off);
        if (v < kIdSlots && p.ids[v] != 0) PutLe(send_area + off, p.ids[v]);
      }
    }
    auto posted = engine.Run([&] {
      Status st = p.conn->PostSend(1000 + i, {p.region.get(), kPeerRecvs * kSlotBytes, len});
      Drain(p);
      return st.ok();
    });
    if (!posted || !*posted) break;  // the link is down
    fe.Barrier();
    (void)engine.Run([&] {
      Drain(p);
      return 0;
    });
  }
  (void)engine.Run([&] {
    engine.DropLink(p.link, Code::kLinkDown, "fuzz input done");
    engine.CloseSession(p.session, Code::kCancelled);
    p.conn.reset();
    p.region.reset();
    p.endpoint.reset();
    return 0;
  });
  return 0;
}
