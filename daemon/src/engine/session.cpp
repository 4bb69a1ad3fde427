#include "engine/session.hpp"

#include <cstring>

#include "mcdma_internal/wait.hpp"

namespace mcdma::daemon {

Result<std::unique_ptr<Session>> Session::Create(uint64_t id, const shm::MailboxGeometry& geo,
                                                 uint32_t uid, const std::string& segment_tag) {
  if (!geo.Valid()) return Status(Code::kInvalid, "mailbox geometry out of range");
  MCDMA_ASSIGN_OR_RETURN(ShmSegment seg, ShmSegment::Create(ShmSegment::NewName('m', segment_tag),
                                                            geo.total_bytes(), uid));
  auto* h = new (seg.data()) shm::MailboxHeader{};
  h->magic = shm::kMailboxMagic;
  h->version = shm::kMailboxVersion;
  h->header_bytes = sizeof(shm::MailboxHeader);
  h->sq_entries = geo.sq_entries;
  h->cq_entries = geo.cq_entries;
  h->inbox_entries = geo.inbox_entries;
  h->sq_offset = geo.sq_offset();
  h->cq_offset = geo.cq_offset();
  h->inbox_offset = geo.inbox_offset();
  h->arena_offset = geo.arena_offset();
  h->app_arena_bytes = geo.app_arena_bytes;
  h->daemon_arena_bytes = geo.daemon_arena_bytes;
  h->session_id = id;
  h->total_bytes = geo.total_bytes();
  std::atomic_thread_fence(std::memory_order_release);
  return std::unique_ptr<Session>(new Session(id, geo, std::move(seg)));
}

Session::Session(uint64_t id, const shm::MailboxGeometry& geo, ShmSegment segment)
    : id_(id),
      geo_(geo),
      segment_(std::move(segment)),
      header_(reinterpret_cast<shm::MailboxHeader*>(segment_.data())),
      sq_(reinterpret_cast<shm::SubmitDesc*>(segment_.data() + geo.sq_offset())),
      cq_(reinterpret_cast<shm::EventDesc*>(segment_.data() + geo.cq_offset())),
      inbox_(reinterpret_cast<shm::EventDesc*>(segment_.data() + geo.inbox_offset())),
      arena_(segment_.data() + geo.arena_offset()),
      daemon_arena_(geo.app_arena_bytes, geo.daemon_arena_bytes, shm::kArenaUnit) {}

std::optional<uint32_t> Session::Available() const {
  uint32_t tail = header_->sq_tail.value.load(std::memory_order_acquire);
  uint32_t n = tail - sq_head_;
  if (n > geo_.sq_entries) return std::nullopt;
  return n;
}

shm::SubmitDesc Session::CopySubmission(uint32_t i) const {
  shm::SubmitDesc d;
  std::memcpy(&d, &sq_[(sq_head_ + i) & (geo_.sq_entries - 1)], sizeof(d));
  return d;
}

void Session::Consume(uint32_t n) {
  sq_head_ += n;
  header_->sq_head.value.store(sq_head_, std::memory_order_release);
}

void Session::ResyncSubmissions(uint32_t tail) {
  sq_head_ = tail;
  header_->sq_head.value.store(sq_head_, std::memory_order_release);
}

bool Session::TryPost(bool inbox, const shm::EventDesc& event, std::span<const std::byte> payload) {
  uint32_t& tail = inbox ? inbox_tail_ : cq_tail_;
  uint32_t entries = inbox ? geo_.inbox_entries : geo_.cq_entries;
  const auto& head_word = inbox ? header_->inbox_head : header_->cq_head;
  uint32_t head = head_word.value.load(std::memory_order_acquire);
  uint32_t used = tail - head;
  bool& fault_reported = inbox ? inbox_fault_reported_ : cq_fault_reported_;
  if (used > entries) {
    // The app wrote a consumer index that is ahead of what was produced or
    // too far behind: treat the ring as full until it says something sane.
    if (!fault_reported) {
      ++counters.ring_faults;
      fault_reported = true;
    }
    return false;
  }
  fault_reported = false;
  if (used == entries) return false;
  shm::EventDesc ev = event;
  ev.payload_len = static_cast<uint32_t>(payload.size());
  ev.payload_off = 0;
  if (!payload.empty()) {
    auto off = daemon_arena_.Allocate(payload.size());
    if (!off) return false;
    std::memcpy(arena_ + *off, payload.data(), payload.size());
    ev.payload_off = static_cast<uint32_t>(*off);
  }
  shm::EventDesc* ring = inbox ? inbox_ : cq_;
  std::memcpy(&ring[tail & (entries - 1)], &ev, sizeof(ev));
  ++tail;
  (inbox ? header_->inbox_tail : header_->cq_tail).value.store(tail, std::memory_order_release);
  return true;
}

bool Session::Post(bool inbox, const shm::EventDesc& event, std::span<const std::byte> payload,
                   const BacklogLimit& limit) {
  auto& backlog = inbox ? inbox_backlog_ : cq_backlog_;
  if (backlog.empty() && TryPost(inbox, event, payload)) {
    RingApp();
    return true;
  }
  if (backlog.size() >= limit.events) return false;
  if (payload.size() > limit.total_room || backlog_bytes_ + payload.size() > limit.bytes) {
    return false;
  }
  backlog.push_back(QueuedEvent{event, std::vector<std::byte>(payload.begin(), payload.end())});
  backlog_bytes_ += payload.size();
  return true;
}

bool Session::FlushBacklog() {
  bool any = false;
  for (bool inbox : {false, true}) {
    auto& backlog = inbox ? inbox_backlog_ : cq_backlog_;
    while (!backlog.empty() && TryPost(inbox, backlog.front().event, backlog.front().payload)) {
      backlog_bytes_ -= backlog.front().payload.size();
      backlog.pop_front();
      any = true;
    }
  }
  if (any) RingApp();
  return any;
}

void Session::RingApp() { wait::Ring(header_->app_bell, /*shared=*/true); }

void Session::MarkClosed(Code reason) {
  uint32_t v =
      reason == Code::kOk ? static_cast<uint32_t>(Code::kCancelled) : static_cast<uint32_t>(reason);
  header_->closed.value.store(v, std::memory_order_release);
  // Wake the app whatever its bell says: it must notice promptly.
  header_->app_bell.seq.fetch_add(1, std::memory_order_release);
  wait::FutexWake(&header_->app_bell.seq, 1 << 30, true);
}

}  // namespace mcdma::daemon
