// libmcdma: the C++ API apps use to talk to their host's mcdma-rpcd.
//
// A Client is one session with the daemon: a gRPC stream over the daemon's
// Unix socket (its end, for any reason, makes the daemon reclaim everything
// the session owned) plus a shared-memory mailbox through which calls,
// replies, notifications and bulk transfers run without gRPC.
//
// Threading: every Client method is thread-safe; many threads may have many
// calls in flight at once. Each Client runs one progress thread that reaps
// completions and runs service handlers (on up to `handler_threads` extra
// threads if configured; with 0 they run on the progress thread, so a
// handler must not block on a synchronous Call — that returns kInvalid
// instead of deadlocking). Futures and Messages may be used from any thread.
//
// Failure: nothing throws. Every operation has a deadline and ends in exactly
// one result: OK or a named Code (see status.hpp). When the daemon goes away,
// everything in flight fails with kUnavailable.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mcdma/status.hpp"

namespace mcdma {

namespace internal {
class ClientCore;
struct OpState;
struct BufferState;
}  // namespace internal

// Where the daemon's control socket is: $MCDMA_SOCKET if set, else, for a
// user other than root, $XDG_RUNTIME_DIR/mcdma/rpcd.sock on Linux and
// $TMPDIR/mcdma/rpcd.sock on macOS, else the system service's socket,
// /run/mcdma/rpcd.sock on Linux and /var/run/mcdma/rpcd.sock on macOS.
// This is where the daemon listens. A path is at most 103 bytes.
std::string DefaultSocketPath();
// Where a client connects by default: DefaultSocketPath(), except that a
// user with no instance of their own reaches the system service's socket.
std::string DefaultClientSocketPath();

struct ClientOptions {
  // Control socket path; empty means DefaultClientSocketPath().
  std::string socket;
  // Name shown by `mcdmactl sessions`; empty means the program name.
  std::string app_name;
  // Mailbox geometry; 0 means the daemon's default (see mcdma-rpcd --help).
  uint32_t submission_entries = 0;
  uint32_t completion_entries = 0;
  uint32_t inbox_entries = 0;
  uint64_t arena_bytes = 0;
  // How long a waiting thread spins (yielding the CPU) before it sleeps.
  // Default 50 us: longer than a cross-CPU wake-up (~30 us).
  std::chrono::microseconds spin_budget{50};
  // Extra threads that run service handlers; 0 runs them on the progress
  // thread (lowest latency; handlers must not block on synchronous calls).
  int handler_threads = 0;
  // Deadline for operations called with timeout 0. Default 30 s.
  std::chrono::milliseconds default_timeout{30000};
  // Deadline for connecting and for control-plane requests. Default 10 s.
  std::chrono::milliseconds connect_timeout{10000};
  // Have the daemons time each stage of this session's calls to other
  // hosts (`mcdmactl trace` shows them; the daemon keeps the newest 4096).
  // Also on when the environment has MCDMA_TRACE_CALLS=1. Costs a clock
  // read per call here and a few in each daemon.
  bool trace_calls = false;
};

// A payload the daemon delivered into this session's mailbox (a reply).
// Zero-copy view; the space is handed back to the daemon on destruction.
class Message {
 public:
  Message() = default;
  Message(Message&&) noexcept;
  Message& operator=(Message&&) noexcept;
  Message(const Message&) = delete;
  Message& operator=(const Message&) = delete;
  ~Message();

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<const std::byte> bytes() const { return {data_, size_}; }
  std::string_view view() const { return {reinterpret_cast<const char*>(data_), size_}; }

 private:
  friend class internal::ClientCore;
  std::shared_ptr<internal::ClientCore> core_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
  uint32_t arena_off_ = 0;
};

// A daemon-allocated, page-aligned shared-memory buffer for bulk data. The
// app may wrap it (numpy, torch, cudaHostRegister, Metal no-copy buffers).
// Freed when the last copy of the Buffer is destroyed (or the session ends).
class Buffer {
 public:
  Buffer() = default;
  std::byte* data() const;
  uint64_t size() const;
  uint64_t id() const;
  bool valid() const { return state_ != nullptr; }
  // How many Buffer copies share this memory (1: this one alone).
  long use_count() const { return state_.use_count(); }

 private:
  friend class internal::ClientCore;
  std::shared_ptr<internal::BufferState> state_;
};

// A handle to another app's export, checked by the daemon on every use.
// Apps never see keys or addresses.
struct RemoteBuffer {
  uint64_t handle = 0;
  uint64_t length = 0;
  bool readable = false;
  bool writable = false;
  std::string peer;  // empty: this host
  std::string name;
};

struct ExportOptions {
  uint64_t offset = 0;               // exposed range inside the buffer
  uint64_t length = 0;               // 0: to the end of the buffer
  std::chrono::milliseconds ttl{0};  // 0: until Unexport or session end
  bool allow_read = true;
  bool allow_write = false;
  std::vector<std::string> allowed_peers;  // remote hosts that may resolve it
};

// One piece of a batched transfer.
struct Transfer {
  const Buffer* local = nullptr;
  uint64_t local_offset = 0;
  const RemoteBuffer* remote = nullptr;
  uint64_t remote_offset = 0;
  uint64_t length = 0;
};

// An incoming call or notification, valid during the handler.
class ServerCall {
 public:
  std::span<const std::byte> payload() const { return payload_; }
  std::string_view view() const {
    return {reinterpret_cast<const char*>(payload_.data()), payload_.size()};
  }
  uint64_t service_id() const { return service_id_; }
  // True for a notification: there is nobody to reply to.
  bool one_way() const { return one_way_; }
  // Time left before the caller's deadline.
  std::chrono::microseconds time_left() const { return time_left_; }
  // Sends the reply (once; later calls return kInvalid). A handler that
  // returns without replying answers kInternal "handler did not reply".
  Status Reply(std::span<const std::byte> reply);
  Status Reply(std::string_view reply) {
    return Reply(
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(reply.data()), reply.size()));
  }
  Status ReplyError(const Status& error);
  bool replied() const { return replied_; }

 private:
  friend class internal::ClientCore;
  internal::ClientCore* core_ = nullptr;
  std::span<const std::byte> payload_;
  uint64_t service_id_ = 0;
  uint64_t call_id_ = 0;
  std::chrono::microseconds time_left_{0};
  bool one_way_ = false;
  bool replied_ = false;
};

using Handler = std::function<void(ServerCall&)>;

// The eventual result of an asynchronous operation. Copyable handle; the
// value is taken once by Wait().
template <typename T>
class Future {
 public:
  Future() = default;
  // True once the operation has completed.
  bool Ready() const;
  // Blocks (spin, then sleep) until completion and returns the result. The
  // operation's own deadline bounds the wait.
  Result<T> Wait();
  // Runs `fn` with the result when the operation completes, on the thread
  // that reaps its completion (the progress thread, or an app thread waiting
  // on another operation), or at once on this thread if it already has.
  // `fn` must not block; a blocking Wait inside it returns kInvalid. Use
  // either Then or Wait.
  void Then(std::function<void(Result<T>)> fn);

 private:
  friend class internal::ClientCore;
  explicit Future(std::shared_ptr<internal::OpState> op) : op_(std::move(op)) {}
  std::shared_ptr<internal::OpState> op_;
};

struct SessionInfo {
  uint64_t session_id = 0;
  std::string host_id;
  std::string daemon_version;
  std::string socket;
};

class Client {
 public:
  // Opens a session. Fails with kUnavailable when no daemon answers.
  static Result<std::unique_ptr<Client>> Connect(const ClientOptions& options = {});
  // Closes the session: in-flight operations fail with kCancelled.
  ~Client();
  // The same while the Client object lives on (other threads may still
  // hold it): in-flight operations fail with kCancelled, later ones with
  // kUnavailable "the client is closed". Idempotent. Not from a service
  // handler (it joins the handler threads).
  void Close();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  SessionInfo info() const;

  // ---- request/reply and notifications (timeout 0 = default_timeout) ----
  Result<uint64_t> Serve(std::string_view service, Handler handler);
  Status Unserve(uint64_t service_id);
  Result<Message> Call(std::string_view service, std::span<const std::byte> request,
                       std::chrono::milliseconds timeout = {});
  Result<Message> Call(std::string_view service, std::string_view request,
                       std::chrono::milliseconds timeout = {});
  // Unlike Call, CallAsync does not retry: when the service's server has
  // gone (or served the name again) since the name was looked up, it fails
  // kNotFound "no service with id ..." and the next call looks the name up
  // again.
  Future<Message> CallAsync(std::string_view service, std::span<const std::byte> request,
                            std::chrono::milliseconds timeout = {});
  // One-way message; OK once it is in the server's inbox.
  Status Notify(std::string_view service, std::span<const std::byte> message,
                std::chrono::milliseconds timeout = {});

  // ---- bulk buffers ----
  Result<Buffer> Alloc(uint64_t size);
  Status Export(const Buffer& buffer, std::string_view name, const ExportOptions& options = {});
  Status Unexport(std::string_view name);
  Result<RemoteBuffer> Resolve(std::string_view name, std::string_view peer = {});
  Status Release(const RemoteBuffer& remote);

  // One-sided transfers between a local buffer and a resolved remote one.
  // Results carry the bytes moved.
  Result<uint64_t> Write(const RemoteBuffer& remote, uint64_t remote_offset, const Buffer& local,
                         uint64_t local_offset, uint64_t length,
                         std::chrono::milliseconds timeout = {});
  Result<uint64_t> Read(const RemoteBuffer& remote, uint64_t remote_offset, const Buffer& local,
                        uint64_t local_offset, uint64_t length,
                        std::chrono::milliseconds timeout = {});
  Future<uint64_t> WriteAsync(const RemoteBuffer& remote, uint64_t remote_offset,
                              const Buffer& local, uint64_t local_offset, uint64_t length,
                              std::chrono::milliseconds timeout = {});
  Future<uint64_t> ReadAsync(const RemoteBuffer& remote, uint64_t remote_offset,
                             const Buffer& local, uint64_t local_offset, uint64_t length,
                             std::chrono::milliseconds timeout = {});
  // Batches: all pieces are submitted together (one wake-up of the daemon);
  // the result is the total bytes, or the first error by piece order.
  Result<uint64_t> WriteBatch(std::span<const Transfer> pieces,
                              std::chrono::milliseconds timeout = {});
  Result<uint64_t> ReadBatch(std::span<const Transfer> pieces,
                             std::chrono::milliseconds timeout = {});

  // For tests and tools: the internal core (mailbox access etc.).
  internal::ClientCore* core() const { return core_.get(); }

 private:
  explicit Client(std::shared_ptr<internal::ClientCore> core);
  std::shared_ptr<internal::ClientCore> core_;
};

}  // namespace mcdma
