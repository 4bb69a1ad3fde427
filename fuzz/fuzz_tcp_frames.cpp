// The tcp transport's frames as a peer sends them (driver/tcp/tcp_frame.cpp,
// tcp_wire*.cpp), and the link messages they carry reassembled as the
// engine does (daemon/src/engine/reassembler.cpp).
//
// The input is the byte stream of a data connection after the handshake.
// A Wire (the I/O thread's half of a connection) reads it from a socket
// pair, with a registered region the peer may WRITE and READ, RECVs posted
// (so SENDs land) and one WRITE and one READ of ours awaiting answers. What
// lands in a RECV is fed to a Reassembler, as the engine feeds its link
// slots. The stateless decoders (frame header, HELLO, endpoint info, token
// hex) run on the input too, with an encode/decode round trip.
//
// Unless the input starts with 0xff, an rkey below 16 in a WRITE or
// READ_REQ header is replaced by the region's real (random) rkey, so inputs
// do not depend on it.
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "driver/tcp/tcp_frame.hpp"
#include "driver/tcp/tcp_registry.hpp"
#include "driver/tcp/tcp_wire.hpp"
#include "engine/reassembler.hpp"
#include "fuzz_support.hpp"
#include "platform/fd.hpp"

namespace mcdma::fuzz {
namespace {
using namespace driver::tcp;

constexpr uint64_t kRegionBytes = 64 << 10;
constexpr uint32_t kRecvBytes = 4096;
constexpr uint32_t kRecvs = 8;
constexpr uint64_t kMaxMessage = 1 << 20;

void CheckDecoders(std::span<const uint8_t> bytes) {
  auto* in = reinterpret_cast<const std::byte*>(bytes.data());
  if (bytes.size() >= kHeaderBytes) {
    Result<FrameHeader> h = DecodeHeader(in);
    if (h.ok()) {
      HeaderBytes again = EncodeHeader(*h);
      Result<FrameHeader> h2 = DecodeHeader(again.data());
      if (!h2.ok() || h2->type != h->type || h2->status != h->status || h2->rkey != h->rkey ||
          h2->wr_id != h->wr_id || h2->remote_addr != h->remote_addr || h2->length != h->length)
        std::abort();
    }
  }
  if (bytes.size() >= kHelloFrameBytes) {
    Result<Hello> hello = DecodeHello(in);
    if (hello.ok()) {
      auto again = EncodeHello(hello->target, hello->sender);
      Result<Hello> h2 = DecodeHello(again.data());
      if (!h2.ok() || h2->target != hello->target || h2->sender != hello->sender) std::abort();
    }
  }
  std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  Result<EndpointInfo> info = ParseEndpointInfo(text);
  if (info.ok()) {
    Result<EndpointInfo> again = ParseEndpointInfo(EncodeEndpointInfo(*info));
    if (!again.ok() || again->address != info->address || again->port != info->port ||
        again->token != info->token)
      std::abort();
  }
  if (auto token = TokenFromHex(text)) {
    if (TokenFromHex(TokenHex(*token)) != token) std::abort();
  }
}

// Replaces small rkeys in WRITE/READ_REQ headers by `rkey`, walking the
// stream frame by frame as far as the headers make sense.
void MapRkeys(std::vector<std::byte>& stream, uint32_t rkey) {
  size_t off = 0;
  while (off + kHeaderBytes <= stream.size()) {
    std::byte* h = stream.data() + off;
    auto type = static_cast<FrameType>(std::to_integer<uint8_t>(h[5]));
    if ((type == FrameType::kWrite || type == FrameType::kReadReq) && LoadLe32(h + 12) < 16)
      StoreLe32(h + 12, rkey);
    uint32_t length = LoadLe32(h + 32);
    off += kHeaderBytes + (type == FrameType::kReadReq ? 0 : length);
  }
}

struct Setup {
  Registry registry{64};
  std::vector<std::byte> memory = std::vector<std::byte>(kRegionBytes);
  RegionEntry entry;
  Setup() {
    entry.addr = memory.data();
    entry.length = memory.size();
    entry.access = driver::kAccessRemoteRead | driver::kAccessRemoteWrite;
    entry.owner = reinterpret_cast<const driver::MemoryRegion*>(this);
    if (!registry.Add(entry).ok()) std::abort();
  }
};

}  // namespace
}  // namespace mcdma::fuzz

using namespace mcdma;
using namespace mcdma::fuzz;
using namespace mcdma::driver::tcp;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Setup* setup = new Setup();
  CheckDecoders({data, size});

  bool raw = size > 0 && data[0] == 0xff;
  std::vector<std::byte> stream(reinterpret_cast<const std::byte*>(data) + (raw ? 1 : 0),
                                reinterpret_cast<const std::byte*>(data) + size);
  if (!raw) MapRkeys(stream, setup->entry.rkey);

  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) != 0) std::abort();
  platform::Fd peer(fds[1]);
  auto shared = std::make_shared<ConnShared>();
  WireContext ctx{setup->registry, std::vector<std::byte>(64 << 10)};
  Wire wire(platform::Fd(fds[0]), shared, ctx);

  // Ours: RECVs for the peer's SENDs, a WRITE and a READ awaiting answers.
  for (uint32_t i = 0; i < kRecvs; ++i) {
    wire.Enqueue({.wr_id = i,
                  .op = driver::WorkOp::kRecv,
                  .local_key = setup->entry.id,
                  .offset = uint64_t{i} * kRecvBytes,
                  .length = kRecvBytes});
  }
  uint64_t tail = uint64_t{kRecvs} * kRecvBytes;
  wire.Enqueue({.wr_id = 100,
                .op = driver::WorkOp::kWrite,
                .local_key = setup->entry.id,
                .offset = tail,
                .length = 64,
                .remote = {.addr = 0, .rkey = 7}});
  wire.Enqueue({.wr_id = 101,
                .op = driver::WorkOp::kRead,
                .local_key = setup->entry.id,
                .offset = tail + 64,
                .length = 64,
                .remote = {.addr = 0, .rkey = 7}});
  wire.Progress();

  daemon::Reassembler reassembler;
  bool reassembler_failed = false;
  char sink[16 << 10];
  size_t sent = 0;
  for (int round = 0; round < 64 && !wire.dead(); ++round) {
    if (sent < stream.size()) {
      ssize_t n = send(peer.get(), stream.data() + sent, stream.size() - sent, MSG_NOSIGNAL);
      if (n > 0) sent += static_cast<size_t>(n);
    } else if (sent == stream.size()) {
      shutdown(peer.get(), SHUT_WR);  // EOF after the input: the peer went away
      ++sent;
    }
    wire.OnReadable();
    while (recv(peer.get(), sink, sizeof(sink), 0) > 0) {
    }
    if (wire.wants_output()) wire.Flush();
    std::deque<driver::WorkCompletion> done;
    {
      MutexLock lock(shared->mu);
      done.swap(shared->completions);
    }
    for (const driver::WorkCompletion& wc : done) {
      if (wc.op != driver::WorkOp::kRecv || wc.code != Code::kOk || reassembler_failed) continue;
      if (wc.byte_len > kRecvBytes) std::abort();  // landed more than the RECV holds
      auto message = reassembler.Feed({setup->memory.data() + wc.wr_id * kRecvBytes, wc.byte_len},
                                      kMaxMessage);
      if (!message.ok())
        reassembler_failed = true;
      else if (*message && (*message)->payload.size() != (*message)->header.total_len)
        std::abort();  // a message is exactly its announced length
      // The slot is free again: post it anew, as the engine does.
      wire.Enqueue({.wr_id = wc.wr_id,
                    .op = driver::WorkOp::kRecv,
                    .local_key = setup->entry.id,
                    .offset = wc.wr_id * kRecvBytes,
                    .length = kRecvBytes});
    }
    if (!done.empty()) wire.Progress();
    if (sent > stream.size() && !wire.wants_output()) break;
  }
  if (!wire.dead()) wire.Fail("fuzz input done");
  return 0;
}
