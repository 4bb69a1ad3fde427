// IoThread: the tcp device's one I/O thread — its "NIC". It waits in the
// platform poller (epoll on Linux, kqueue on macOS) on the listening
// sockets (the device's, and one per rail address), every data connection
// and a wake-up, and does all socket I/O
// non-blocking; it polls briefly after activity, then blocks.
//
//   * The engine thread hands it work through Post/Adopt/Close/Reset: a command
//     queue under a mutex plus a wake-up signal (skipped while one is
//     already pending). Commands are handled in order.
//   * Accepted sockets (from any listener) must present a HELLO naming an open endpoint within
//     the handshake timeout; they are then parked in the Rendezvous for that
//     endpoint's Connect. Anything else is closed.
//   * Completions go to each connection's ConnShared; after a round of
//     events that delivered any, the notifier (Device::SetNotifier) is called
//     once, from this thread. It is never called during or after Stop().
//
// Threading: Post/Adopt/Close/Reset/SetNotifier may be called from any thread
// (the engine's, in practice); Start and Stop from the owner only. All other
// state belongs to the I/O thread.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <unordered_map>
#include <vector>

#include "driver/tcp/tcp_registry.hpp"
#include "driver/tcp/tcp_shared.hpp"
#include "driver/tcp/tcp_socket.hpp"
#include "mcdma/status.hpp"
#include "mcdma_internal/thread_annotations.hpp"
#include "platform/poller.hpp"
#include "platform/wakeup.hpp"

namespace mcdma::driver::tcp {

class Wire;
struct WireContext;

class IoThread {
 public:
  IoThread(Registry& registry, Rendezvous& rendezvous, std::chrono::milliseconds handshake_timeout);
  ~IoThread();
  IoThread(const IoThread&) = delete;
  IoThread& operator=(const IoThread&) = delete;

  // Takes the listening sockets (at least one) and starts the thread.
  Status Start(std::vector<Fd> listeners);
  // Stops and joins the thread: every connection goes down (its requests
  // complete kLinkDown); later commands are answered inline the same way.
  void Stop() MCDMA_EXCLUDES(mu_);

  void SetNotifier(std::function<void()> notify) MCDMA_EXCLUDES(notify_mu_);

  // A checked request for the connection behind `conn`.
  void Post(const std::shared_ptr<ConnShared>& conn, const Request& request);
  // A handshaken socket becomes the data connection behind `conn`.
  void Adopt(Fd fd, const std::shared_ptr<ConnShared>& conn);
  // The engine destroyed the connection behind `conn`.
  void Close(const std::shared_ptr<ConnShared>& conn);
  // The engine abandoned the connection behind `conn` (Connection::Abandon):
  // it goes down at once (its requests complete kLinkDown) and its socket
  // closes with a reset, discarding whatever was still unsent.
  void Reset(const std::shared_ptr<ConnShared>& conn);

 private:
  struct Command {
    enum class Kind : uint8_t { kPost, kAdopt, kClose, kReset } kind = Kind::kPost;
    std::shared_ptr<ConnShared> conn;
    Request request;
    Fd fd;
  };
  struct Accepting;
  // What a poll event's tag points at.
  struct Handle {
    enum class Kind : uint8_t { kListener, kWake, kAccepting, kWire } kind;
    int fd = -1;
    Wire* wire = nullptr;            // kWire
    Accepting* accepting = nullptr;  // kAccepting
  };
  // An accepted socket reading its HELLO.
  struct Accepting {
    Handle handle{.kind = Handle::Kind::kAccepting};
    Fd fd;
    std::array<std::byte, kHelloFrameBytes> hello{};
    size_t got = 0;
    std::chrono::steady_clock::time_point deadline;
  };
  struct WireSlot {
    std::unique_ptr<Wire> wire;
    Handle handle{.kind = Handle::Kind::kWire};
  };

  void Submit(Command command) MCDMA_EXCLUDES(mu_);
  void Run() MCDMA_EXCLUDES(mu_);
  void HandleCommands() MCDMA_EXCLUDES(mu_);
  // `stopped`: the thread is gone; answer without it.
  void ApplyCommand(Command& command, bool stopped);
  void AcceptAll(int listener);
  void ReadHello(Accepting* accepting);
  void DropAccepting(Accepting* accepting);
  int NextTimeoutMs();
  void ExpireAccepting();
  void UpdateInterest(WireSlot& slot);
  void ReapDead();
  void NotifyIfNeeded() MCDMA_EXCLUDES(notify_mu_);
  void Shutdown() MCDMA_EXCLUDES(mu_);

  Registry& registry_;
  Rendezvous& rendezvous_;
  const std::chrono::milliseconds handshake_timeout_;
  platform::Poller poller_;
  platform::Wakeup wake_;
  std::vector<Fd> listeners_;
  std::deque<Handle> listener_handles_;  // a deque: pointers stay valid
  Handle wake_handle_{.kind = Handle::Kind::kWake};

  Mutex mu_;
  std::deque<Command> commands_ MCDMA_GUARDED_BY(mu_);
  bool wake_pending_ MCDMA_GUARDED_BY(mu_) = false;
  bool stop_ MCDMA_GUARDED_BY(mu_) = false;
  bool stopped_ MCDMA_GUARDED_BY(mu_) = false;  // commands are answered inline

  Mutex notify_mu_;
  std::shared_ptr<const std::function<void()>> notify_ MCDMA_GUARDED_BY(notify_mu_);

  // I/O thread only.
  std::unique_ptr<WireContext> ctx_;
  std::unordered_map<ConnShared*, WireSlot> wires_;
  std::unordered_map<Accepting*, std::unique_ptr<Accepting>> accepting_;
  std::thread thread_;
};

}  // namespace mcdma::driver::tcp
