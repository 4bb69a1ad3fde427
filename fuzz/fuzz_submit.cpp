// The submission path: what an app writes into its mailbox (submission ring
// descriptors, the tail index, its arena half, the completion and inbox
// head indices) as the engine reads and validates it
// (engine_submit.cpp, engine_calls.cpp, engine_transfer.cpp, session.cpp).
//
// Each input opens a real session on a real engine (mailbox segment and
// all), gives it a service, a buffer, an export and a handle to it, maps
// the mailbox as an app does, writes the input there and lets the engine
// consume it, then closes the session.
//
// Input: flags (u8), arena byte count (u16), that many bytes for the app
// half of the arena, then 64-byte SubmitDesc records, published in batches
// of the ring's size. flags bit 0: the first batch publishes the tail given
// by the next u32 instead of the true one; bit 1: the app's completion head
// is set to the next u32 after each batch; bit 2: ids are used as written.
// Otherwise a target or local_buffer below 16 names one of the session's
// own objects (1 service, 2 buffer, 3 handle, 4 session, 5.. the calls
// delivered to its inbox so far), so that inputs do not depend on the
// engine's id counter.
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <vector>

#include "fuzz_engine.hpp"
#include "fuzz_support.hpp"
#include "mcdma_internal/mailbox_layout.hpp"
#include "mcdma_internal/shm_segment.hpp"

namespace mcdma::fuzz {
namespace {

constexpr size_t kMaxBatches = 16;
constexpr size_t kIdSlots = 16;
constexpr uint8_t kFlagWildTail = 1;
constexpr uint8_t kFlagWildCqHead = 2;
constexpr uint8_t kFlagRawIds = 4;

struct Objects {
  uint64_t session = 0;
  daemon::OpenedInfo opened;
  std::vector<uint64_t> ids = std::vector<uint64_t>(kIdSlots, 0);
  size_t next_call_slot = 5;
};

// Opens the session and everything a descriptor may name (one engine step).
bool Open(daemon::Engine& engine, Objects& o) {
  static std::atomic<uint64_t> serial{0};
  uint64_t n = serial++;
  auto r = engine.Run([&]() -> bool {
    daemon::HelloInfo hello;
    hello.app_name = "fuzz-submit";
    hello.pid = static_cast<uint32_t>(getpid());
    hello.uid = static_cast<uint32_t>(getuid());
    auto opened = engine.OpenSession(hello);
    if (!opened.ok()) return false;
    o.opened = *opened;
    o.session = opened->session_id;
    o.ids[4] = o.session;
    auto svc = engine.Serve(o.session, "fuzz.svc." + std::to_string(n));
    auto buf = engine.Alloc(o.session, 8192);
    if (!svc.ok() || !buf.ok()) return false;
    o.ids[1] = *svc;
    o.ids[2] = buf->buffer_id;
    (void)engine.Mapped(o.session, buf->segment);
    daemon::ExportSpec spec;
    spec.name = "fuzz.exp." + std::to_string(n);
    spec.buffer_id = buf->buffer_id;
    spec.allow_read = true;
    spec.allow_write = true;
    if (!engine.Export(o.session, spec).ok()) return false;
    auto handle = engine.Resolve(o.session, "", spec.name);
    if (!handle.ok()) return false;
    o.ids[3] = handle->handle;
    return true;
  });
  return r && *r;
}

uint64_t MapId(const Objects& o, uint64_t v) {
  return v < kIdSlots && o.ids[v] != 0 ? o.ids[v] : v;
}

}  // namespace
}  // namespace mcdma::fuzz

using namespace mcdma;
using namespace mcdma::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzEngine& fe = FuzzEngine::Get();
  daemon::Engine& engine = fe.engine();
  Input in(data, size);
  uint8_t flags = in.U8();
  uint32_t wild_tail = (flags & kFlagWildTail) ? in.U32() : 0;
  uint32_t wild_cq_head = (flags & kFlagWildCqHead) ? in.U32() : 0;

  Objects o;
  if (!Open(engine, o)) std::abort();  // the engine must always take a session
  auto seg = ShmSegment::Open(o.opened.mailbox_segment, o.opened.mailbox_bytes);
  if (!seg.ok()) std::abort();
  (void)engine.Run([&] { return engine.Mapped(o.session, o.opened.mailbox_segment); });

  auto* h = reinterpret_cast<shm::MailboxHeader*>(seg->data());
  auto* sq = reinterpret_cast<shm::SubmitDesc*>(seg->data() + h->sq_offset);
  auto* cq = reinterpret_cast<shm::EventDesc*>(seg->data() + h->cq_offset);
  auto* inbox = reinterpret_cast<shm::EventDesc*>(seg->data() + h->inbox_offset);
  std::byte* arena = seg->data() + h->arena_offset;

  auto arena_bytes = in.Take(std::min<size_t>(in.U16(), h->app_arena_bytes));
  std::memcpy(arena, arena_bytes.data(), arena_bytes.size());

  uint32_t tail = 0;
  for (size_t batch = 0; batch < kMaxBatches && in.left() > 0; ++batch) {
    uint32_t n = 0;
    while (n < h->sq_entries && in.left() > 0) {
      shm::SubmitDesc d{};
      auto bytes = in.Take(sizeof(d));
      std::memcpy(&d, bytes.data(), bytes.size());
      if ((flags & kFlagRawIds) == 0) {
        d.target = MapId(o, d.target);
        d.local_buffer = MapId(o, d.local_buffer);
      }
      std::memcpy(&sq[(tail + n) & (h->sq_entries - 1)], &d, sizeof(d));
      ++n;
    }
    tail += n;
    uint32_t published = (batch == 0 && (flags & kFlagWildTail)) ? wild_tail : tail;
    h->sq_tail.value.store(published, std::memory_order_release);
    h->daemon_bell.seq.fetch_add(1, std::memory_order_release);
    fe.Barrier();
    // Take what the daemon posted, as an app does: completions, then calls.
    uint32_t cq_tail = h->cq_tail.value.load(std::memory_order_acquire);
    h->cq_head.value.store((flags & kFlagWildCqHead) ? wild_cq_head : cq_tail,
                           std::memory_order_release);
    uint32_t inbox_head = h->inbox_head.value.load(std::memory_order_relaxed);
    uint32_t inbox_tail = h->inbox_tail.value.load(std::memory_order_acquire);
    for (uint32_t i = inbox_head; i != inbox_tail && i - inbox_head <= h->inbox_entries; ++i) {
      shm::EventDesc ev;
      std::memcpy(&ev, &inbox[i & (h->inbox_entries - 1)], sizeof(ev));
      if (ev.call_id != 0 && o.next_call_slot < kIdSlots) o.ids[o.next_call_slot++] = ev.call_id;
    }
    (void)cq;
    h->inbox_head.value.store(inbox_tail, std::memory_order_release);
    if (h->closed.value.load(std::memory_order_acquire) != 0) break;
    tail = h->sq_head.value.load(std::memory_order_acquire);
    if (published != tail) break;  // the engine skipped or stopped: nothing more to learn
  }
  (void)engine.Run([&] {
    engine.CloseSession(o.session, Code::kCancelled);
    return 0;
  });
  return 0;
}
