// The raw shared-memory baseline: what two processes can do with a shared
// segment and a futex and nothing else. It is the floor the daemon's mailbox
// path is compared with (the daemon adds a hop and its own rings).
//
// Wait protocol (docs/measurements.md, lesson 4). The waiter spins on `seq`, yielding
// the CPU, for kSpinBudget; then it sets its own `sleeping` flag, re-reads
// `seq`, and sleeps on the futex only if it has not moved. The sender writes
// the payload, bumps `seq`, and only READS `sleeping`: if set, FUTEX_WAKE.
// Both the flag store / seq load (waiter) and the seq bump / flag load
// (sender) are sequentially consistent, so at least one side sees the
// other's store: either the waiter sees the new seq and does not sleep, or
// the sender sees the flag and wakes it (and FUTEX_WAIT itself refuses to
// sleep once seq differs). Only the waiter ever clears its flag: a sender
// that cleared it could be preempted between reading and clearing and wipe
// out a later "I am asleep", which loses a wake-up and hangs the pair.
#include "shm_pingpong.hpp"

#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "harness/round_trips.hpp"
#include "mcdma_internal/wait.hpp"
#include "platform/socket.hpp"

namespace mcdma::bench {

using harness::ByteView;
using harness::Clock;
using harness::MeasureRoundTrips;
using harness::RoleOptions;
using harness::RunClientPayloads;
using harness::SignalReady;
using platform::Fd;

namespace {

constexpr uint32_t kMagic = 0x4d42534d;  // "MSBM"
// Longer than a cross-CPU wake-up (~30 us), as the daemon's default is.
constexpr auto kSpinBudget = std::chrono::microseconds(50);
// A sleeper re-checks its deadline at least this often.
constexpr auto kSleepSlice = std::chrono::milliseconds(100);

// One direction. `seq` is the futex word, written only by the sender;
// `sleeping` is written only by the waiter. Separate cache lines so the
// spinner's reads do not bounce the line the other side writes.
struct alignas(64) Channel {
  uint32_t seq;
  uint32_t length;  // set before seq is bumped; read after seq is seen
  alignas(64) uint32_t sleeping;
};

struct alignas(64) Header {
  uint32_t magic;
  uint32_t capacity;  // bytes of payload room per direction
  uint32_t stop;      // set by the client (before a final bump) to end the server
  Channel request;    // client -> server
  Channel reply;      // server -> client
};
static_assert(std::is_trivially_copyable_v<Header>);
static_assert(std::atomic_ref<uint32_t>::required_alignment <= alignof(uint32_t));
static_assert(std::atomic<uint32_t>::is_always_lock_free, "futex words must be lock-free atomics");

constexpr size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }
constexpr size_t SegmentSize(size_t capacity) { return sizeof(Header) + 2 * RoundUp(capacity, 64); }

std::atomic_ref<uint32_t> Atomic(uint32_t& word) { return std::atomic_ref<uint32_t>(word); }

// The words live in shared memory as plain uint32_t, reached through
// atomic_ref; the platform's wait takes the same word as an atomic.
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
const std::atomic<uint32_t>* AsAtomic(uint32_t* word) {
  return reinterpret_cast<const std::atomic<uint32_t>*>(word);
}

void FutexWait(uint32_t* word, uint32_t expected, std::chrono::nanoseconds timeout) {
  // Process-shared: the other side is another process. A changed value, an
  // interrupt and the timeout all mean "look again".
  mcdma::wait::FutexWait(AsAtomic(word), expected, timeout, /*shared=*/true);
}

void FutexWake(uint32_t* word) { mcdma::wait::FutexWake(AsAtomic(word), 1, /*shared=*/true); }

// Waits until ch.seq differs from `seen`; returns the new value.
mcdma::Result<uint32_t> AwaitSeq(Channel& ch, uint32_t seen, Clock::time_point deadline) {
  auto spin_end = Clock::now() + kSpinBudget;
  for (;;) {
    uint32_t seq = Atomic(ch.seq).load(std::memory_order_acquire);
    if (seq != seen) return seq;
    if (Clock::now() >= spin_end) break;
    sched_yield();  // never a pure spin: the peer may need this CPU
  }
  Atomic(ch.sleeping).store(1, std::memory_order_seq_cst);
  for (;;) {
    uint32_t seq = Atomic(ch.seq).load(std::memory_order_seq_cst);
    auto now = Clock::now();
    if (seq != seen || now >= deadline) {
      Atomic(ch.sleeping).store(0, std::memory_order_relaxed);  // the waiter clears its own flag
      if (seq != seen) return seq;
      return mcdma::Status(mcdma::Code::kTimeout, "shm peer did not answer within the deadline");
    }
    FutexWait(&ch.seq, seen, std::min<std::chrono::nanoseconds>(deadline - now, kSleepSlice));
  }
}

// Publishes `length` bytes already written to the channel's data area.
void Publish(Channel& ch, uint32_t length) {
  ch.length = length;
  Atomic(ch.seq).fetch_add(1, std::memory_order_seq_cst);
  if (Atomic(ch.sleeping).load(std::memory_order_seq_cst) != 0) FutexWake(&ch.seq);
}

// The child's mapping of the segment it inherited, checked before use.
class Mapping {
 public:
  static mcdma::Result<Mapping> Open(int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0)
      return mcdma::Status(mcdma::Code::kSystem, std::string("fstat: ") + strerror(errno));
    size_t size = static_cast<size_t>(st.st_size);
    if (size < sizeof(Header)) return mcdma::Status(mcdma::Code::kInvalid, "shm segment too small");
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
      return mcdma::Status(mcdma::Code::kSystem, std::string("mmap: ") + strerror(errno));
    Mapping m(p, size);
    const Header& h = m.header();
    if (h.magic != kMagic || SegmentSize(h.capacity) > size) {
      return mcdma::Status(mcdma::Code::kInvalid, "shm segment has a bad header");
    }
    return m;
  }
  Mapping(Mapping&& o) noexcept : base_(o.base_), size_(o.size_) { o.base_ = nullptr; }
  Mapping& operator=(Mapping&&) = delete;
  ~Mapping() {
    if (base_ != nullptr) munmap(base_, size_);
  }

  Header& header() const { return *static_cast<Header*>(base_); }
  std::byte* request_data() const { return static_cast<std::byte*>(base_) + sizeof(Header); }
  std::byte* reply_data() const { return request_data() + RoundUp(header().capacity, 64); }

 private:
  Mapping(void* base, size_t size) : base_(base), size_(size) {}
  void* base_;
  size_t size_;
};

}  // namespace

mcdma::Result<Fd> CreateShmSegment(size_t max_payload) {
  if (max_payload > (1u << 30))
    return mcdma::Status(mcdma::Code::kInvalid, "payload too large for shm");
  size_t size = SegmentSize(max_payload);
  MCDMA_ASSIGN_OR_RETURN(Fd fd,
                         mcdma::platform::AnonymousSharedMemory("mcdma-bench-pingpong", size));
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED)
    return mcdma::Status(mcdma::Code::kSystem, std::string("mmap: ") + strerror(errno));
  auto* h = static_cast<Header*>(p);  // the rest is already zero (ftruncate)
  h->magic = kMagic;
  h->capacity = static_cast<uint32_t>(max_payload);
  munmap(p, size);
  return fd;
}

int RunShmServer(const RoleOptions& options) {
  auto mapping = Mapping::Open(options.fd);
  if (!mapping.ok()) {
    fprintf(stderr, "mcdma_bench_local shm-server: %s\n", mapping.status().message().c_str());
    return 1;
  }
  Header& h = mapping->header();
  SignalReady(options.ready_fd);
  uint32_t seen = 0;
  for (;;) {
    // Idle waits are bounded by the child's whole life, so a server whose
    // client vanished without saying stop still ends by itself.
    auto seq =
        AwaitSeq(h.request, seen, Clock::now() + std::chrono::milliseconds(options.run_limit_ms));
    if (!seq.ok()) {
      fprintf(stderr, "mcdma_bench_local shm-server: %s\n", seq.status().message().c_str());
      return 1;
    }
    seen = *seq;
    if (Atomic(h.stop).load(std::memory_order_acquire) != 0) return 0;
    uint32_t n = h.request.length;
    if (n > h.capacity) {
      fprintf(stderr, "mcdma_bench_local shm-server: request of %u B exceeds the segment\n", n);
      return 1;
    }
    std::memcpy(mapping->reply_data(), mapping->request_data(), n);
    Publish(h.reply, n);
  }
}

int RunShmClient(const RoleOptions& options) {
  auto mapping = Mapping::Open(options.fd);
  if (!mapping.ok()) {
    fprintf(stderr, "mcdma_bench_local shm-client: %s\n", mapping.status().message().c_str());
    return 1;
  }
  Header& h = mapping->header();
  uint32_t reply_seen = 0;
  auto timeout = std::chrono::milliseconds(options.timeout_ms);
  auto round_trip = [&](std::span<const std::byte> request) -> mcdma::Result<ByteView> {
    if (request.size() > h.capacity)
      return mcdma::Status(mcdma::Code::kInvalid, "payload exceeds the shm segment");
    std::memcpy(mapping->request_data(), request.data(), request.size());
    Publish(h.request, static_cast<uint32_t>(request.size()));
    MCDMA_ASSIGN_OR_RETURN(reply_seen, AwaitSeq(h.reply, reply_seen, Clock::now() + timeout));
    uint32_t n = h.reply.length;
    if (n > h.capacity)
      return mcdma::Status(mcdma::Code::kOutOfRange, "reply length exceeds the segment");
    return ByteView{{mapping->reply_data(), n}};
  };
  int rc = RunClientPayloads(options, [&](size_t payload) {
    return MeasureRoundTrips(payload, options.warmup, options.iterations, round_trip);
  });
  // Tell the server to end (also after a failure, so it does not idle out).
  Atomic(h.stop).store(1, std::memory_order_release);
  Publish(h.request, 0);
  return rc;
}

}  // namespace mcdma::bench
