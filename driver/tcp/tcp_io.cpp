// IoThread: the poll loop, command queue, accepting and the HELLO check.
#include "driver/tcp/tcp_io.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>
#include <vector>

#include "driver/tcp/tcp_wire.hpp"
#include "mcdma_internal/sys.hpp"
#include "platform/socket.hpp"

namespace mcdma::driver::tcp {
namespace {

constexpr int kMaxEvents = 64;
// Sockets that have connected but not yet presented a valid HELLO; more are
// closed at once (anyone who can reach the port can open one).
constexpr size_t kMaxAccepting = 128;
constexpr size_t kScratchBytes = size_t{256} << 10;

}  // namespace

IoThread::IoThread(Registry& registry, Rendezvous& rendezvous,
                   std::chrono::milliseconds handshake_timeout)
    : registry_(registry), rendezvous_(rendezvous), handshake_timeout_(handshake_timeout) {}

IoThread::~IoThread() { Stop(); }

Status IoThread::Start(std::vector<Fd> listeners) {
  MCDMA_ASSIGN_OR_RETURN(poller_, platform::Poller::Create());
  MCDMA_ASSIGN_OR_RETURN(wake_, platform::Wakeup::Create());
  listeners_ = std::move(listeners);
  for (const Fd& listener : listeners_) {
    listener_handles_.push_back({.kind = Handle::Kind::kListener, .fd = listener.get()});
  }
  wake_handle_.fd = wake_.fd();
  for (Handle& handle : listener_handles_) {
    MCDMA_RETURN_IF_ERROR(poller_.Add(handle.fd, &handle, platform::kInterestRead));
  }
  MCDMA_RETURN_IF_ERROR(poller_.Add(wake_handle_.fd, &wake_handle_, platform::kInterestRead));
  ctx_ = std::make_unique<WireContext>(WireContext{
      .registry = registry_, .scratch = std::vector<std::byte>(kScratchBytes), .notify = false});
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

void IoThread::Stop() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  if (wake_.valid()) wake_.Signal();
  if (thread_.joinable()) thread_.join();
}

void IoThread::SetNotifier(std::function<void()> notify) {
  auto shared = notify ? std::make_shared<const std::function<void()>>(std::move(notify)) : nullptr;
  MutexLock lock(notify_mu_);
  notify_ = std::move(shared);
}

void IoThread::Post(const std::shared_ptr<ConnShared>& conn, const Request& request) {
  Submit({.kind = Command::Kind::kPost, .conn = conn, .request = request, .fd = Fd()});
}

void IoThread::Adopt(Fd fd, const std::shared_ptr<ConnShared>& conn) {
  Submit({.kind = Command::Kind::kAdopt, .conn = conn, .request = {}, .fd = std::move(fd)});
}

void IoThread::Close(const std::shared_ptr<ConnShared>& conn) {
  Submit({.kind = Command::Kind::kClose, .conn = conn, .request = {}, .fd = Fd()});
}

void IoThread::Reset(const std::shared_ptr<ConnShared>& conn) {
  Submit({.kind = Command::Kind::kReset, .conn = conn, .request = {}, .fd = Fd()});
}

void IoThread::Submit(Command command) {
  bool queued = false;
  bool wake = false;
  {
    MutexLock lock(mu_);
    if (!stopped_) {
      commands_.push_back(std::move(command));
      queued = true;
      wake = !std::exchange(wake_pending_, true);
    }
  }
  if (wake) wake_.Signal();
  // Stopped: the thread is gone, so the caller answers the command itself.
  if (!queued) ApplyCommand(command, /*stopped=*/true);
}

void IoThread::ApplyCommand(Command& command, bool stopped) {
  auto it = wires_.find(command.conn.get());
  Wire* wire = it == wires_.end() ? nullptr : it->second.wire.get();
  switch (command.kind) {
    case Command::Kind::kPost:
      if (wire != nullptr) {
        wire->Enqueue(command.request);
      } else {
        command.conn->Push({.wr_id = command.request.wr_id,
                            .op = command.request.op,
                            .code = Code::kLinkDown,
                            .byte_len = 0,
                            .detail = "the connection is down"});
        if (!stopped) ctx_->notify = true;
      }
      break;
    case Command::Kind::kAdopt: {
      if (stopped) {
        command.conn->MarkDown("the tcp device was destroyed");
        break;
      }
      WireSlot& slot = wires_[command.conn.get()];
      slot.wire = std::make_unique<Wire>(std::move(command.fd), command.conn, *ctx_);
      slot.handle.fd = slot.wire->fd();
      slot.handle.wire = slot.wire.get();
      Status added = poller_.Add(slot.handle.fd, &slot.handle, platform::kInterestRead);
      if (!added.ok()) slot.wire->Fail(added.message() + ": data connection");
      break;
    }
    case Command::Kind::kClose:
      if (wire != nullptr) wire->Abandon();
      break;
    case Command::Kind::kReset:
      // No CLOSE, no flush: the socket (closed when the dead wire is
      // reaped, after this batch) sends RST and drops unsent bytes. Best
      // effort: should SO_LINGER fail, the close is an orderly one.
      if (wire != nullptr) {
        (void)SetResetOnClose(wire->fd());
        wire->Fail("the connection was abandoned (its path failed)");
      }
      break;
  }
}

void IoThread::HandleCommands() {
  wake_.Drain();
  std::deque<Command> batch;
  {
    MutexLock lock(mu_);
    batch.swap(commands_);
    wake_pending_ = false;
  }
  std::vector<Wire*> touched;
  for (Command& command : batch) {
    ApplyCommand(command, /*stopped=*/false);
    auto it = wires_.find(command.conn.get());
    if (it != wires_.end()) touched.push_back(it->second.wire.get());
  }
  // Credits for the batch's RECVs go out together; then requests, then bytes.
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  for (Wire* wire : touched) wire->Progress();
}

void IoThread::Run() {
  std::array<platform::PollEvent, kMaxEvents> events{};
  // After activity the thread keeps polling (yielding the CPU) for a short
  // while before it blocks: a request/reply exchange then finds it awake
  // instead of paying a wake-up on every message. Nothing spins longer.
  constexpr auto kSpin = std::chrono::microseconds(50);
  auto last_activity = std::chrono::steady_clock::now() - kSpin;
  for (;;) {
    bool spinning = std::chrono::steady_clock::now() - last_activity < kSpin;
    Result<size_t> waited = poller_.Wait(events, spinning ? 0 : NextTimeoutMs());
    if (!waited.ok()) break;  // cannot happen with valid fds
    size_t n = *waited;
    if (n > 0) last_activity = std::chrono::steady_clock::now();
    if (n == 0 && spinning) {
      std::this_thread::yield();
      continue;
    }
    for (size_t i = 0; i < n; ++i) {
      auto* handle = static_cast<Handle*>(events[i].tag);
      switch (handle->kind) {
        case Handle::Kind::kListener:
          AcceptAll(handle->fd);
          break;
        case Handle::Kind::kWake:
          HandleCommands();
          break;
        case Handle::Kind::kAccepting:
          ReadHello(handle->accepting);
          break;
        case Handle::Kind::kWire:
          if (handle->wire->dead()) break;
          if (events[i].readable) handle->wire->OnReadable();
          if (events[i].writable) handle->wire->Flush();
          break;
      }
    }
    ExpireAccepting();
    for (auto& [conn, slot] : wires_) UpdateInterest(slot);
    NotifyIfNeeded();
    ReapDead();
    MutexLock lock(mu_);
    if (stop_) break;
  }
  Shutdown();
}

void IoThread::UpdateInterest(WireSlot& slot) {
  Wire& wire = *slot.wire;
  if (wire.dead() || wire.wants_output() == wire.watching_output) return;
  wire.watching_output = wire.wants_output();
  uint32_t interest =
      platform::kInterestRead | (wire.watching_output ? platform::kInterestWrite : 0u);
  Status modified = poller_.Modify(wire.fd(), &slot.handle, interest);
  if (!modified.ok()) wire.Fail(modified.message() + ": data connection");
}

void IoThread::ReapDead() {
  for (auto it = wires_.begin(); it != wires_.end();) {
    if (it->second.wire->dead()) {
      poller_.Remove(it->second.wire->fd());
      it = wires_.erase(it);  // closes the socket
    } else {
      ++it;
    }
  }
}

void IoThread::NotifyIfNeeded() {
  if (!ctx_->notify) return;
  ctx_->notify = false;
  std::shared_ptr<const std::function<void()>> notify;
  {
    MutexLock lock(notify_mu_);
    notify = notify_;
  }
  if (notify) (*notify)();
}

void IoThread::AcceptAll(int listener) {
  for (;;) {
    Fd fd = platform::Accept(listener, platform::Blocking::kNonBlocking);
    if (!fd.valid()) return;  // EAGAIN, or a transient error: the poller reports again
    if (accepting_.size() >= kMaxAccepting || !SetDataSocketOptions(fd.get()).ok()) continue;
    auto accepting = std::make_unique<Accepting>();
    accepting->fd = std::move(fd);
    accepting->handle.fd = accepting->fd.get();
    accepting->handle.accepting = accepting.get();
    accepting->deadline = std::chrono::steady_clock::now() + handshake_timeout_;
    if (!poller_.Add(accepting->handle.fd, &accepting->handle, platform::kInterestRead).ok()) {
      continue;
    }
    Accepting* key = accepting.get();
    accepting_.emplace(key, std::move(accepting));
  }
}

void IoThread::ReadHello(Accepting* accepting) {
  // The dialer sends its HELLO and then waits for ours, so reading exactly
  // the HELLO's bytes leaves nothing of the data stream behind here.
  ssize_t n = recv(accepting->fd.get(), accepting->hello.data() + accepting->got,
                   accepting->hello.size() - accepting->got, 0);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  if (n <= 0) {
    DropAccepting(accepting);
    return;
  }
  accepting->got += static_cast<size_t>(n);
  if (accepting->got < accepting->hello.size()) return;
  Result<Hello> hello = DecodeHello(accepting->hello.data());
  poller_.Remove(accepting->fd.get());
  // An unknown token, or an endpoint already dialled: the socket closes.
  if (hello.ok()) (void)rendezvous_.Offer(hello->target, hello->sender, accepting->fd);
  accepting_.erase(accepting);
}

void IoThread::DropAccepting(Accepting* accepting) {
  poller_.Remove(accepting->fd.get());
  accepting_.erase(accepting);
}

int IoThread::NextTimeoutMs() {
  if (accepting_.empty()) return -1;
  auto first = std::chrono::steady_clock::time_point::max();
  for (const auto& [key, accepting] : accepting_) first = std::min(first, accepting->deadline);
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      first - std::chrono::steady_clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count() + 1, 0, 60'000));
}

void IoThread::ExpireAccepting() {
  auto now = std::chrono::steady_clock::now();
  for (auto it = accepting_.begin(); it != accepting_.end();) {
    Accepting* accepting = (it++)->first;
    if (accepting->deadline <= now) DropAccepting(accepting);
  }
}

void IoThread::Shutdown() {
  for (auto& [conn, slot] : wires_) slot.wire->Fail("the tcp device was destroyed");
  wires_.clear();
  accepting_.clear();
  listeners_.clear();
  // From here on Submit answers commands itself; those that raced with the
  // shutdown are answered now. wires_ is empty and stays so.
  std::deque<Command> left;
  {
    MutexLock lock(mu_);
    stopped_ = true;
    left.swap(commands_);
  }
  for (Command& command : left) ApplyCommand(command, /*stopped=*/true);
}

}  // namespace mcdma::driver::tcp
