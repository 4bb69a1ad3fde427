#include "client_core.hpp"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "mcdma_internal/wait.hpp"
#include "platform/names.hpp"
#include "platform/process.hpp"
#include "rpc/rpc_status.hpp"

namespace mcdma::internal {
namespace {

thread_local bool t_on_progress_thread = false;
// Set while this thread reaps completions (callbacks run there).
thread_local bool t_reaping = false;

// How long a waiter trusts the daemon beyond an op's own deadline before it
// gives up on it (the daemon enforces deadlines; this guards a hung daemon).
constexpr auto kDeadlineGrace = std::chrono::seconds(2);
constexpr auto kSleepCap = std::chrono::milliseconds(100);

}  // namespace

Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return Status::Ok();
  if (auto carried = rpc::StatusFromGrpc(s)) return *std::move(carried);
  const std::string& m = s.error_message();
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE ||
      s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return Status(Code::kUnavailable, "mcdma-rpcd is not reachable: " + m);
  }
  // The daemon carries its own codes in the details: one without them
  // failed in gRPC on the way (the connection to the daemon), not in the
  // daemon.
  return Status(Code::kUnavailable, "the request to mcdma-rpcd failed in gRPC (" +
                                        rpc::GrpcCodeName(s.error_code()) + "): " + m);
}

ClientCore::ClientCore(ClientOptions options) : options_(std::move(options)) {
  if (const char* env = std::getenv("MCDMA_TRACE_CALLS"); env != nullptr && std::string(env) == "1")
    options_.trace_calls = true;
  if (options_.socket.empty()) options_.socket = DefaultClientSocketPath();
  if (options_.app_name.empty()) options_.app_name = platform::ProgramName();
  if (options_.default_timeout.count() <= 0)
    options_.default_timeout = std::chrono::milliseconds(30000);
  info_.socket = options_.socket;
}

Result<std::shared_ptr<ClientCore>> ClientCore::Connect(const ClientOptions& options) {
  std::shared_ptr<ClientCore> core(new ClientCore(options));
  Status st = core->Open();
  if (!st.ok()) {
    core->Shutdown();
    return st;
  }
  return core;
}

Status ClientCore::Open() {
  // A path macOS could not bind is refused on every OS, by name.
  MCDMA_RETURN_IF_ERROR(platform::CheckUnixSocketPath(options_.socket));
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(4 << 20);
  channel_ = grpc::CreateCustomChannel("unix:" + options_.socket,
                                       grpc::InsecureChannelCredentials(), args);
  auto connect_deadline = std::chrono::system_clock::now() + options_.connect_timeout;
  if (!channel_->WaitForConnected(connect_deadline)) {
    MCDMA_RETURN_IF_ERROR(platform::CheckSocketAccess(options_.socket));
    return Status(Code::kUnavailable, "cannot reach mcdma-rpcd at " + options_.socket +
                                          " (is it running? set MCDMA_SOCKET or --socket)");
  }
  stub_ = v1::Control::NewStub(channel_);
  stream_ = stub_->OpenSession(&stream_ctx_);
  v1::SessionRequest hello;
  auto* h = hello.mutable_hello();
  h->set_protocol_version(shm::kProtocolVersion);
  h->set_app_name(options_.app_name);
  h->set_pid(static_cast<uint32_t>(getpid()));
  h->set_uid(static_cast<uint32_t>(geteuid()));
  h->set_submission_entries(options_.submission_entries);
  h->set_completion_entries(options_.completion_entries);
  h->set_inbox_entries(options_.inbox_entries);
  h->set_arena_bytes(options_.arena_bytes);
  v1::SessionEvent ev;
  if (!stream_->Write(hello) || !stream_->Read(&ev) || !ev.has_opened()) {
    stream_->WritesDone();
    return FromGrpc(stream_->Finish());
  }
  const v1::SessionOpened& o = ev.opened();
  info_.session_id = o.session_id();
  info_.host_id = o.host_id();
  info_.daemon_version = o.daemon_version();
  token_ = o.token();
  MCDMA_ASSIGN_OR_RETURN(mailbox_, ShmSegment::Open(o.mailbox_segment(), o.mailbox_bytes()));
  MCDMA_RETURN_IF_ERROR(MarkMapped(o.mailbox_segment()));
  // Check the header against the layout before trusting any offset in it.
  header_ = reinterpret_cast<shm::MailboxHeader*>(mailbox_.data());
  geo_ = shm::MailboxGeometry{header_->sq_entries, header_->cq_entries, header_->inbox_entries,
                              header_->app_arena_bytes, header_->daemon_arena_bytes};
  if (header_->magic != shm::kMailboxMagic || header_->version != shm::kMailboxVersion ||
      !geo_.Valid() || header_->sq_offset != geo_.sq_offset() ||
      header_->cq_offset != geo_.cq_offset() || header_->inbox_offset != geo_.inbox_offset() ||
      header_->arena_offset != geo_.arena_offset() || geo_.total_bytes() > mailbox_.size()) {
    return Status(Code::kInternal,
                  "the daemon's mailbox header does not match this library's layout");
  }
  sq_ = reinterpret_cast<shm::SubmitDesc*>(mailbox_.data() + geo_.sq_offset());
  cq_ = reinterpret_cast<shm::EventDesc*>(mailbox_.data() + geo_.cq_offset());
  inbox_ = reinterpret_cast<shm::EventDesc*>(mailbox_.data() + geo_.inbox_offset());
  arena_ = mailbox_.data() + geo_.arena_offset();
  AdoptRingPositions();

  stream_thread_ = std::thread([this] { StreamLoop(); });
  progress_ = std::thread([this] { ProgressLoop(); });
  for (int i = 0; i < options_.handler_threads; ++i)
    workers_.emplace_back([this] { HandlerWorker(); });
  return Status::Ok();
}

void ClientCore::AdoptRingPositions() {
  app_arena_ = ArenaAllocator(0, geo_.app_arena_bytes, shm::kArenaUnit);
  sq_tail_ = header_->sq_tail.value.load(std::memory_order_acquire);
  cq_head_ = header_->cq_head.value.load(std::memory_order_acquire);
  inbox_head_ = header_->inbox_head.value.load(std::memory_order_acquire);
}

ClientCore::~ClientCore() { Shutdown(); }

void ClientCore::Shutdown() {
  std::call_once(shutdown_once_, [this] {
    stop_.store(true);
    WakeProgress();
    if (progress_.joinable()) progress_.join();
    {
      MutexLock lock(work_mu_);
      work_cv_.notify_all();
    }
    for (auto& w : workers_) w.join();
    workers_.clear();
    if (stream_) {
      stream_ctx_.TryCancel();
      if (stream_thread_.joinable()) stream_thread_.join();
    }
    closed_.store(true);
    FailAll(Code::kCancelled, "the client was closed");
  });
}

void ClientCore::WakeProgress() {
  if (header_ == nullptr) return;
  header_->app_bell.seq.fetch_add(1, std::memory_order_release);
  wait::FutexWake(&header_->app_bell.seq, 1 << 30, true);
}

void ClientCore::StreamLoop() {
  v1::SessionEvent ev;
  while (stream_->Read(&ev)) {
  }
  grpc::Status st = stream_->Finish();
  if (!stop_.load()) {
    uint32_t why = header_->closed.value.load(std::memory_order_acquire);
    std::string msg = why != 0 ? std::string("the daemon closed the session (") +
                                     CodeName(static_cast<Code>(why)) + ")"
                               : "the session's stream to mcdma-rpcd ended: " + st.error_message();
    {
      MutexLock lock(ops_mu_);
      closed_message_ = msg;
    }
    closed_.store(true);
    WakeProgress();
  }
}

Status ClientCore::CheckOpen() const {
  if (closed_.load()) {
    MutexLock lock(ops_mu_);
    return Status(Code::kUnavailable,
                  closed_message_.empty() ? "the session is closed" : closed_message_);
  }
  return Status::Ok();
}

void ClientCore::ProgressLoop() {
  t_on_progress_thread = true;
  wait::Backoff backoff(options_.spin_budget);
  std::optional<Clock::time_point> idle_since;  // the first round that found nothing
  while (!stop_.load(std::memory_order_relaxed)) {
    bool did = TryReapCompletions();
    did |= ReapInbox();
    if (sq_mu_.try_lock()) {
      MutexLock lock(sq_mu_, std::adopt_lock);
      did |= FlushReleases();
    }
    if (closed_.load()) {
      std::string msg;
      {
        MutexLock lock(ops_mu_);
        msg = closed_message_;
      }
      FailAll(Code::kUnavailable, msg);
      space_cv_.notify_all();
      // Keep running until Shutdown so late submitters are failed too.
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    if (did) {
      if (idle_since) progress_gap_.Observe(Clock::now() - *idle_since);
      idle_since.reset();
      backoff.Reset(progress_gap_.Budget(options_.spin_budget));
      continue;
    }
    if (!idle_since) idle_since = Clock::now();
    if (backoff.Spin()) continue;
    uint32_t seq = wait::PrepareSleep(header_->app_bell);
    bool work = header_->cq_tail.value.load(std::memory_order_acquire) !=
                    header_->cq_head.value.load(std::memory_order_relaxed) ||
                header_->inbox_tail.value.load(std::memory_order_acquire) != inbox_head_ ||
                stop_.load();
    if (!work) wait::FutexWait(&header_->app_bell.seq, seq, kSleepCap, true);
    wait::CancelSleep(header_->app_bell);
    backoff.Reset();
  }
}

bool ClientCore::OnReapingThread() { return t_reaping; }

bool ClientCore::TryReapCompletions() {
  if (t_reaping) return false;
  if (!reap_mu_.try_lock()) return false;
  MutexLock lock(reap_mu_, std::adopt_lock);
  t_reaping = true;
  bool did = ReapCompletions();
  t_reaping = false;
  return did;
}

bool ClientCore::ReapCompletions() {
  uint32_t tail = header_->cq_tail.value.load(std::memory_order_acquire);
  uint32_t n = tail - cq_head_;
  if (n == 0) return false;
  if (n > geo_.cq_entries) {
    // Only a corrupted mailbox gets here: nothing in it can be trusted.
    {
      MutexLock lock(ops_mu_);
      closed_message_ = "the mailbox's completion ring is corrupted";
    }
    closed_.store(true);
    return false;
  }
  for (uint32_t i = 0; i < n; ++i) {
    shm::EventDesc ev;
    std::memcpy(&ev, &cq_[(cq_head_ + i) & (geo_.cq_entries - 1)], sizeof(ev));
    bool payload_ok = ev.payload_len == 0 || (ev.payload_off >= geo_.app_arena_bytes &&
                                              uint64_t{ev.payload_off} + ev.payload_len <=
                                                  geo_.app_arena_bytes + geo_.daemon_arena_bytes);
    std::string text;
    if (payload_ok && ev.payload_len > 0 && ev.status != 0) {
      text.assign(reinterpret_cast<const char*>(arena_ + ev.payload_off), ev.payload_len);
    }
    if (ev.kind == static_cast<uint8_t>(shm::EventKind::kFault)) {
      if (payload_ok && ev.payload_len > 0) ReleaseDelivered(ev.payload_off, ev.payload_len);
      continue;
    }
    std::shared_ptr<OpState> op;
    {
      MutexLock lock(ops_mu_);
      auto it = ops_.find(ev.tag);
      if (it != ops_.end()) {
        op = std::move(it->second);
        ops_.erase(it);
      }
    }
    if (!op) {
      // Late completion of an op a waiter gave up on: hand back its payload.
      if (payload_ok && ev.payload_len > 0) ReleaseDelivered(ev.payload_off, ev.payload_len);
      continue;
    }
    const Code code = CodeFromWire(ev.status);
    // A completion's `detail` is its Reason (a number this build does not
    // know, from a newer daemon, reads kNone).
    const Reason reason = code == Code::kOk ? Reason::kNone : ReasonFromWire(ev.detail);
    op->bytes = ev.bytes;
    if (code == Code::kOk && ev.payload_len > 0 && payload_ok) {
      op->has_payload = true;
      op->payload_off = ev.payload_off;
      op->payload_len = ev.payload_len;
    } else if (payload_ok && ev.payload_len > 0) {
      ReleaseDelivered(ev.payload_off, ev.payload_len);
    }
    Finish(op, code, std::move(text), reason);
  }
  cq_head_ += n;
  header_->cq_head.value.store(cq_head_, std::memory_order_release);
  return true;
}

void ClientCore::Finish(const std::shared_ptr<OpState>& op, Code code, std::string message,
                        Reason reason) {
  if (op->has_request) {
    MutexLock lock(sq_mu_);
    app_arena_.Free(op->request_off, op->request_len);
    op->has_request = false;
  }
  space_cv_.notify_all();
  // The server behind a cached service id is gone: the next call by that
  // name looks it up again (Call and Notify retry at once; CallAsync
  // cannot, its request is no longer held).
  if (reason == Reason::kNoSuchService && op->service_id != 0) ForgetServiceId(op->service_id);
  op->code = code;
  op->reason = reason;
  op->message = std::move(message);
  op->done.store(1, std::memory_order_release);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (op->waiting.load(std::memory_order_relaxed) != 0) wait::FutexWake(&op->done, 1 << 30, false);
  std::function<void(OpState&)> cb;
  {
    MutexLock lock(op->callback_mu);
    if (op->callback && !op->callback_ran) {
      op->callback_ran = true;
      cb = std::move(op->callback);
    }
  }
  if (cb) cb(*op);
}

void ClientCore::FailAll(Code code, const std::string& message) {
  std::unordered_map<uint64_t, std::shared_ptr<OpState>> ops;
  {
    MutexLock lock(ops_mu_);
    ops.swap(ops_);
  }
  for (auto& [tag, op] : ops) Finish(op, code, message.empty() ? "the session is closed" : message);
}

Status ClientCore::Wait(OpState& op) {
  if (op.done.load(std::memory_order_acquire) != 0) return Status::Ok();
  if (t_on_progress_thread || t_reaping) {
    return Status(Code::kInvalid,
                  "a blocking wait on the progress thread would deadlock; use handler_threads "
                  "or an async call with Then()");
  }
  const Clock::time_point began = Clock::now();
  wait::Backoff backoff(completion_wait_.Budget(options_.spin_budget));
  while (op.done.load(std::memory_order_acquire) == 0) {
    // Reap for ourselves while spinning: the completion is usually ours.
    if (TryReapCompletions()) continue;
    if (backoff.Spin()) continue;
    if (Clock::now() > op.deadline + kDeadlineGrace) {
      // The daemon should have completed it by now. Claim it, unless the
      // completion is just being delivered.
      std::shared_ptr<OpState> self;
      {
        MutexLock lock(ops_mu_);
        for (auto it = ops_.begin(); it != ops_.end(); ++it) {
          if (it->second.get() == &op) {
            self = std::move(it->second);
            ops_.erase(it);
            break;
          }
        }
      }
      if (self)
        Finish(self, Code::kTimeout, "mcdma-rpcd did not complete the operation by its deadline");
      continue;
    }
    op.waiting.store(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (op.done.load(std::memory_order_acquire) == 0)
      wait::FutexWait(&op.done, 0, kSleepCap, false);
  }
  completion_wait_.Observe(Clock::now() - began);
  return Status::Ok();
}

void ClientCore::OnComplete(const std::shared_ptr<OpState>& op, std::function<void(OpState&)> fn) {
  {
    MutexLock lock(op->callback_mu);
    if (op->done.load(std::memory_order_acquire) == 0) {
      op->callback = std::move(fn);
      return;
    }
    if (op->callback_ran) return;
    op->callback_ran = true;
  }
  fn(*op);
}

}  // namespace mcdma::internal
