// The data path of libmcdma: submissions, releases, the inbox and handlers.
#include <cstring>

#include "client_core.hpp"
#include "mcdma_internal/wait.hpp"

namespace mcdma::internal {
namespace {
thread_local bool t_in_handler = false;
}  // namespace

Status ClientCore::Submit(std::span<Submission> subs, std::chrono::milliseconds timeout) {
  MCDMA_RETURN_IF_ERROR(CheckOpen());
  if (timeout.count() <= 0) timeout = options_.default_timeout;
  const auto deadline = Clock::now() + timeout;
  const bool reaper = t_in_handler && options_.handler_threads == 0;
  MutexLock lock(sq_mu_);
  FlushReleases();
  bool unpublished = false;
  auto publish = [&]() MCDMA_REQUIRES(sq_mu_) {
    if (!unpublished) return;
    header_->sq_tail.value.store(sq_tail_, std::memory_order_release);
    wait::Ring(header_->daemon_bell, /*shared=*/true);
    unpublished = false;
  };
  // Waits for space; false once the deadline passed or the session closed.
  // A Then callback runs while its thread holds the completion ring: it
  // must not wait for room that only reaping can make.
  const bool in_callback = OnReapingThread();
  auto no_space = [&](const std::string& what) -> Status {
    if (closed_.load()) return CheckOpen();
    if (in_callback) return Status(Code::kBusy, what + " (a completion callback cannot wait)");
    return Status(Code::kTimeout, what + " until the deadline");
  };
  // Runs under `lock`, which it drops and retakes around reaping: the
  // analysis cannot follow Submit's scoped lock into a lambda.
  auto wait_for_space = [&]() MCDMA_NO_THREAD_SAFETY_ANALYSIS -> bool {
    publish();
    if (closed_.load() || Clock::now() >= deadline || in_callback) return false;
    if (reaper) {
      // Handlers on the progress thread free space by reaping themselves.
      lock.Unlock();
      TryReapCompletions();
      std::this_thread::yield();
      lock.Lock();
    } else {
      space_cv_.wait_for(lock.native(), std::chrono::microseconds(200));
    }
    return true;
  };
  for (Submission& sub : subs) {
    uint32_t len = static_cast<uint32_t>(sub.payload.size());
    uint64_t off = 0;
    if (sub.payload.size() > app_arena_.capacity()) {
      publish();
      return Status(Code::kNoMemory,
                    "payload of " + std::to_string(sub.payload.size()) +
                        " bytes exceeds the mailbox arena's app half (" +
                        std::to_string(app_arena_.capacity()) +
                        " bytes); use a Buffer for bulk data or a larger arena_bytes");
    }
    if (len > 0) {
      std::optional<uint64_t> got;
      while (!(got = app_arena_.Allocate(len))) {
        if (!wait_for_space()) {
          return no_space("no room in the mailbox arena");
        }
      }
      off = *got;
      std::memcpy(arena_ + off, sub.payload.data(), len);
    }
    while (sq_tail_ - header_->sq_head.value.load(std::memory_order_acquire) >= geo_.sq_entries) {
      if (!wait_for_space()) {
        if (len > 0) app_arena_.Free(off, len);
        return no_space("the submission ring is full");
      }
    }
    shm::SubmitDesc d = sub.desc;
    auto left =
        std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now()).count();
    d.timeout_us = static_cast<uint32_t>(std::clamp<int64_t>(left, 1, UINT32_MAX));
    d.payload_off = static_cast<uint32_t>(off);
    d.payload_len = len;
    if (sub.op) {
      sub.op->deadline = deadline;
      sub.op->core = weak_from_this();
      if (len > 0) {
        sub.op->has_request = true;
        sub.op->request_off = static_cast<uint32_t>(off);
        sub.op->request_len = len;
      }
      MutexLock ops_lock(ops_mu_);
      d.tag = next_tag_++;
      ops_.emplace(d.tag, sub.op);
    } else {
      d.flags |= shm::kFlagNoCompletion;
    }
    if (options_.trace_calls && d.opcode == static_cast<uint8_t>(shm::Op::kCall)) {
      d.flags |= shm::kFlagTrace;
      d.local_offset = static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
              .count());
    }
    std::memcpy(&sq_[sq_tail_ & (geo_.sq_entries - 1)], &d, sizeof(d));
    ++sq_tail_;
    unpublished = true;
  }
  publish();
  return Status::Ok();
}

bool ClientCore::FlushReleases() {
  std::vector<std::pair<uint32_t, uint32_t>> todo;
  {
    MutexLock lock(release_mu_);
    if (release_queue_.empty()) return false;
    todo.swap(release_queue_);
  }
  size_t i = 0;
  for (; i < todo.size(); ++i) {
    if (sq_tail_ - header_->sq_head.value.load(std::memory_order_acquire) >= geo_.sq_entries) break;
    shm::SubmitDesc d{};
    d.opcode = static_cast<uint8_t>(shm::Op::kRelease);
    d.flags = shm::kFlagNoCompletion;
    d.payload_off = todo[i].first;
    d.payload_len = todo[i].second;
    std::memcpy(&sq_[sq_tail_ & (geo_.sq_entries - 1)], &d, sizeof(d));
    ++sq_tail_;
  }
  if (i < todo.size()) {
    MutexLock lock(release_mu_);
    release_queue_.insert(release_queue_.begin(), todo.begin() + static_cast<ptrdiff_t>(i),
                          todo.end());
  }
  if (i > 0) {
    header_->sq_tail.value.store(sq_tail_, std::memory_order_release);
    wait::Ring(header_->daemon_bell, /*shared=*/true);
  }
  return i > 0;
}

void ClientCore::ReleaseDelivered(uint32_t off, uint32_t len) {
  {
    MutexLock lock(release_mu_);
    release_queue_.emplace_back(off, len);
  }
  if (!sq_mu_.try_lock()) return;
  MutexLock lock(sq_mu_, std::adopt_lock);
  if (!closed_.load()) FlushReleases();
}

bool ClientCore::ReapInbox() {
  uint32_t tail = header_->inbox_tail.value.load(std::memory_order_acquire);
  uint32_t n = tail - inbox_head_;
  if (n == 0) return false;
  if (n > geo_.inbox_entries) {
    {
      MutexLock lock(ops_mu_);
      closed_message_ = "the mailbox's inbox ring is corrupted";
    }
    closed_.store(true);
    return false;
  }
  for (uint32_t i = 0; i < n; ++i) {
    shm::EventDesc ev;
    std::memcpy(&ev, &inbox_[(inbox_head_ + i) & (geo_.inbox_entries - 1)], sizeof(ev));
    if (options_.handler_threads > 0) {
      MutexLock lock(work_mu_);
      work_.push_back(ev);
      work_queued_.fetch_add(1, std::memory_order_release);
      work_cv_.notify_one();
    } else {
      RunHandler(ev);
    }
  }
  inbox_head_ += n;
  header_->inbox_head.value.store(inbox_head_, std::memory_order_release);
  return true;
}

void ClientCore::HandlerWorker() {
  // After a handler, the thread spins (yielding) for spin_budget, or longer
  // where the gaps between calls were short (handler_gap_), before it
  // sleeps: back-to-back calls, a ping-pong's, find it awake, as the
  // progress thread would be (handler_threads = 0), without a wake-up each.
  wait::Backoff backoff(options_.spin_budget);
  while (true) {
    while (work_queued_.load(std::memory_order_acquire) == 0 && !stop_.load() && backoff.Spin()) {
    }
    const Clock::time_point idle_since = backoff.started();
    shm::EventDesc ev;
    {
      MutexLock lock(work_mu_);
      work_cv_.wait(lock.native(),
                    [&]() MCDMA_REQUIRES(work_mu_) { return stop_.load() || !work_.empty(); });
      if (work_.empty()) return;
      ev = work_.front();
      work_.pop_front();
      work_queued_.fetch_sub(1, std::memory_order_relaxed);
    }
    handler_gap_.Observe(Clock::now() - idle_since);
    RunHandler(ev);
    backoff.Reset(handler_gap_.Budget(options_.spin_budget));
  }
}

void ClientCore::RunHandler(const shm::EventDesc& ev) {
  bool one_way = ev.kind == static_cast<uint8_t>(shm::EventKind::kIncomingNotify);
  bool is_call = ev.kind == static_cast<uint8_t>(shm::EventKind::kIncomingCall);
  if (!one_way && !is_call) return;
  bool payload_ok = ev.payload_len == 0 || (ev.payload_off >= geo_.app_arena_bytes &&
                                            uint64_t{ev.payload_off} + ev.payload_len <=
                                                geo_.app_arena_bytes + geo_.daemon_arena_bytes);
  if (!payload_ok) return;
  std::shared_ptr<Handler> handler;
  {
    MutexLock lock(handlers_mu_);
    auto it = handlers_.find(ev.service_id);
    if (it != handlers_.end()) handler = it->second;
  }
  ServerCall call;
  call.core_ = this;
  call.payload_ = std::span<const std::byte>(arena_ + ev.payload_off, ev.payload_len);
  call.service_id_ = ev.service_id;
  call.call_id_ = ev.call_id;
  call.time_left_ = std::chrono::microseconds(ev.timeout_us);
  call.one_way_ = one_way;
  t_in_handler = true;
  if (handler) {
    (*handler)(call);
    if (is_call && !call.replied_)
      (void)call.ReplyError(Status(Code::kInternal, "the handler did not reply"));
  } else if (is_call) {
    (void)call.ReplyError(
        Status(Code::kNotFound, "no handler for service " + std::to_string(ev.service_id)));
  }
  t_in_handler = false;
  if (ev.payload_len > 0) ReleaseDelivered(ev.payload_off, ev.payload_len);
}

Status ClientCore::SendReply(uint64_t call_id, std::span<const std::byte> payload, Code code) {
  Submission sub;
  sub.desc.opcode = static_cast<uint8_t>(shm::Op::kReply);
  sub.desc.target = call_id;
  sub.desc.status = static_cast<uint16_t>(code);
  sub.payload = payload;
  // The op only exists to free the reply's arena range when the daemon is
  // done with it; nobody waits for it.
  sub.op = std::make_shared<OpState>();
  return Submit(std::span<Submission>(&sub, 1), {});
}

Result<uint64_t> ClientCore::AddHandler(std::string_view service, Handler handler) {
  MCDMA_RETURN_IF_ERROR(CheckOpen());
  // Held across the RPC so a call that arrives right after the daemon
  // registers the service finds its handler.
  MutexLock lock(handlers_mu_);
  v1::ServeRequest req;
  *req.mutable_session() = Ref();
  req.set_service(std::string(service));
  v1::ServeReply rep;
  grpc::ClientContext ctx;
  Status st = FromGrpc(stub_->Serve(NewContext(ctx), req, &rep));
  if (!st.ok()) return st;
  handlers_[rep.service_id()] = std::make_shared<Handler>(std::move(handler));
  return rep.service_id();
}

Status ClientCore::RemoveHandler(uint64_t service_id) {
  v1::UnserveRequest req;
  *req.mutable_session() = Ref();
  req.set_service_id(service_id);
  v1::UnserveReply rep;
  grpc::ClientContext ctx;
  Status st = FromGrpc(stub_->Unserve(NewContext(ctx), req, &rep));
  MutexLock lock(handlers_mu_);
  handlers_.erase(service_id);
  return st;
}

Result<uint64_t> ClientCore::ServiceId(std::string_view name, bool refresh) {
  {
    MutexLock lock(handlers_mu_);
    auto it = service_ids_.find(name);
    if (it != service_ids_.end() && !refresh) return it->second;
  }
  std::string key(name);
  MCDMA_RETURN_IF_ERROR(CheckOpen());
  // "peer/service" names a service on another host (peers come with links).
  std::string peer;
  std::string service = key;
  if (auto slash = key.find('/');
      slash != std::string::npos && key.find('/', slash + 1) == std::string::npos && slash > 0) {
    peer = key.substr(0, slash);
    service = key.substr(slash + 1);
  }
  v1::LookupServiceRequest req;
  *req.mutable_session() = Ref();
  req.set_peer(peer);
  req.set_service(service);
  v1::LookupServiceReply rep;
  grpc::ClientContext ctx;
  Status st = FromGrpc(stub_->LookupService(NewContext(ctx), req, &rep));
  if (!st.ok() && !peer.empty() && st.reason() == Reason::kNotLinked) {
    // Not a peer: a local service whose name contains '/'.
    req.set_peer("");
    req.set_service(key);
    grpc::ClientContext ctx2;
    st = FromGrpc(stub_->LookupService(NewContext(ctx2), req, &rep));
  }
  if (!st.ok()) return st;
  MutexLock lock(handlers_mu_);
  service_ids_[key] = rep.service_id();
  return rep.service_id();
}

void ClientCore::ForgetServiceId(uint64_t id) {
  MutexLock lock(handlers_mu_);
  std::erase_if(service_ids_, [id](const auto& entry) { return entry.second == id; });
}

Message ClientCore::MakeMessage(const OpState& op) {
  Message m;
  if (!op.has_payload) return m;
  m.core_ = shared_from_this();
  m.data_ = arena_ + op.payload_off;
  m.size_ = op.payload_len;
  m.arena_off_ = op.payload_off;
  return m;
}

void ClientCore::ReleaseMessage(Message& m) {
  if (m.core_ == nullptr) return;
  ReleaseDelivered(m.arena_off_, static_cast<uint32_t>(m.size_));
  m.core_.reset();
  m.data_ = nullptr;
  m.size_ = 0;
}

}  // namespace mcdma::internal
