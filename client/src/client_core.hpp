// ClientCore: the machinery behind mcdma::Client. Internal header (tests use
// it to reach the mailbox directly).
//
// Threads:
//  * any app thread: submits (under sq_mu_), waits on its own OpState;
//  * the progress thread: reaps the completion ring and the inbox, completes
//    OpStates, runs handlers (or hands them to handler threads);
//  * the stream thread: blocks reading the session's gRPC stream; its end
//    means the session is over (daemon gone, or it closed the session).
// Memory: the mailbox is mapped for the core's lifetime. Payloads the daemon
// delivered stay in the daemon half of the arena until released (Message
// destruction, handler return); the app half is managed by app_arena_.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>  // std::once_flag
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "mcdma/client.hpp"
#include "mcdma/v1/control.grpc.pb.h"
#include "mcdma_internal/arena_allocator.hpp"
#include "mcdma_internal/mailbox_layout.hpp"
#include "mcdma_internal/shm_segment.hpp"
#include "mcdma_internal/thread_annotations.hpp"
#include "mcdma_internal/wait.hpp"

namespace mcdma::internal {

using Clock = std::chrono::steady_clock;

// One submitted operation awaiting its completion.
struct OpState {
  std::atomic<uint32_t> done{0};     // futex word: 1 once completed
  std::atomic<uint32_t> waiting{0};  // a thread sleeps on `done`
  Code code = Code::kOk;
  Reason reason = Reason::kNone;
  std::string message;
  uint64_t bytes = 0;
  // CALL: the reply payload, in the daemon half (released by its Message).
  bool has_payload = false;
  uint32_t payload_off = 0;
  uint32_t payload_len = 0;
  // The request payload in the app half, freed when the op completes.
  bool has_request = false;
  uint32_t request_off = 0;
  uint32_t request_len = 0;
  Clock::time_point deadline;
  uint64_t service_id = 0;  // CALL/NOTIFY: the cached id it was sent to
  Mutex callback_mu;
  std::function<void(OpState&)> callback MCDMA_GUARDED_BY(callback_mu);
  bool callback_ran MCDMA_GUARDED_BY(callback_mu) = false;
  std::weak_ptr<ClientCore> core;
};

struct BufferState {
  ShmSegment segment;
  uint64_t id = 0;
  std::weak_ptr<ClientCore> core;
  ~BufferState();
};

// A submission to make: the descriptor without ring bookkeeping.
struct Submission {
  shm::SubmitDesc desc{};
  std::span<const std::byte> payload;  // copied into the app half
  std::shared_ptr<OpState> op;         // null: no completion expected
};

class ClientCore : public std::enable_shared_from_this<ClientCore> {
 public:
  static Result<std::shared_ptr<ClientCore>> Connect(const ClientOptions& options);
  ~ClientCore();
  // Ends the session; in-flight operations fail with kCancelled.
  void Shutdown();

  const ClientOptions& options() const { return options_; }
  SessionInfo info() const { return info_; }

  // Submits all of `subs` together (one doorbell). Each op gets its tag and
  // deadline here. Fails without submitting anything it has not published.
  Status Submit(std::span<Submission> subs, std::chrono::milliseconds timeout)
      MCDMA_EXCLUDES(sq_mu_);
  // Waits for an op; kInvalid if called on the progress thread.
  Status Wait(OpState& op);
  void OnComplete(const std::shared_ptr<OpState>& op, std::function<void(OpState&)> fn);
  // Hands a delivered daemon-half range back (never blocks).
  void ReleaseDelivered(uint32_t off, uint32_t len) MCDMA_EXCLUDES(release_mu_);

  Result<uint64_t> ServiceId(std::string_view name, bool refresh) MCDMA_EXCLUDES(handlers_mu_);
  // Drops every cached name that maps to `id` (its server is gone).
  void ForgetServiceId(uint64_t id) MCDMA_EXCLUDES(handlers_mu_);
  Result<uint64_t> AddHandler(std::string_view service, Handler handler)
      MCDMA_EXCLUDES(handlers_mu_);
  Status RemoveHandler(uint64_t service_id) MCDMA_EXCLUDES(handlers_mu_);
  Status SendReply(uint64_t call_id, std::span<const std::byte> payload, Code code);

  // Control plane (gRPC).
  Result<Buffer> Alloc(uint64_t size);
  Status FreeBuffer(uint64_t id);
  Status Export(const Buffer& b, std::string_view name, const ExportOptions& o);
  Status Unexport(std::string_view name);
  Result<RemoteBuffer> Resolve(std::string_view name, std::string_view peer);
  Status Release(const RemoteBuffer& r);

  // Builds the public handles (they are friends of these classes).
  Message MakeMessage(const OpState& op);
  template <typename T>
  static Future<T> MakeFuture(std::shared_ptr<OpState> op) {
    return Future<T>(std::move(op));
  }
  static uint64_t BufferId(const Buffer& b) { return b.state_ ? b.state_->id : 0; }
  void ReleaseMessage(Message& m);

  // Test access: the whole mapped mailbox.
  std::span<std::byte> mailbox_for_testing() { return {mailbox_.data(), mailbox_.size()}; }
  bool closed() const { return closed_.load(); }

 private:
  explicit ClientCore(ClientOptions options);
  Status Open();
  // Takes the rings' positions and the app arena from the mapped header.
  // Open calls it before it starts the threads, so no other thread can
  // touch the members under sq_mu_ and reap_mu_ yet.
  void AdoptRingPositions() MCDMA_NO_THREAD_SAFETY_ANALYSIS;
  void ProgressLoop();
  void StreamLoop() MCDMA_EXCLUDES(ops_mu_);
  bool ReapCompletions() MCDMA_REQUIRES(reap_mu_);
  // True on a thread that is reaping completions (running a Then callback).
  static bool OnReapingThread();
  bool TryReapCompletions() MCDMA_EXCLUDES(reap_mu_);
  bool ReapInbox();
  bool FlushReleases() MCDMA_REQUIRES(sq_mu_) MCDMA_EXCLUDES(release_mu_);
  void Finish(const std::shared_ptr<OpState>& op, Code code, std::string message,
              Reason reason = Reason::kNone) MCDMA_EXCLUDES(sq_mu_);
  void FailAll(Code code, const std::string& message) MCDMA_EXCLUDES(ops_mu_);
  void RunHandler(const shm::EventDesc& ev) MCDMA_EXCLUDES(handlers_mu_);
  void HandlerWorker() MCDMA_EXCLUDES(work_mu_);
  void WakeProgress();
  Status CheckOpen() const MCDMA_EXCLUDES(ops_mu_);
  grpc::ClientContext* NewContext(grpc::ClientContext& ctx) const;
  v1::SessionRef Ref() const;
  Status MarkMapped(const std::string& segment) MCDMA_EXCLUDES(stream_write_mu_);

  ClientOptions options_;
  SessionInfo info_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Control::Stub> stub_;
  grpc::ClientContext stream_ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::SessionRequest, v1::SessionEvent>> stream_;
  // Serializes writes on stream_ (the stream thread only reads it).
  Mutex stream_write_mu_;
  std::string token_;

  ShmSegment mailbox_;
  shm::MailboxGeometry geo_{};
  shm::MailboxHeader* header_ = nullptr;
  shm::SubmitDesc* sq_ = nullptr;
  shm::EventDesc* cq_ = nullptr;
  shm::EventDesc* inbox_ = nullptr;
  std::byte* arena_ = nullptr;

  // Submission side.
  Mutex sq_mu_;
  std::condition_variable space_cv_;
  uint32_t sq_tail_ MCDMA_GUARDED_BY(sq_mu_) = 0;
  ArenaAllocator app_arena_ MCDMA_GUARDED_BY(sq_mu_){0, 0, shm::kArenaUnit};
  // Releases queued from threads that must not block.
  Mutex release_mu_;
  std::vector<std::pair<uint32_t, uint32_t>> release_queue_ MCDMA_GUARDED_BY(release_mu_);

  // Ops in flight by tag.
  mutable Mutex ops_mu_;
  std::unordered_map<uint64_t, std::shared_ptr<OpState>> ops_ MCDMA_GUARDED_BY(ops_mu_);
  uint64_t next_tag_ MCDMA_GUARDED_BY(ops_mu_) = 1;

  // Completion ring consumer: the progress thread, or a waiting app thread
  // that reaps for itself (saving a thread hop).
  Mutex reap_mu_;
  uint32_t cq_head_ MCDMA_GUARDED_BY(reap_mu_) = 0;
  // Inbox consumer: only the progress thread.
  uint32_t inbox_head_ = 0;

  Mutex handlers_mu_;
  std::unordered_map<uint64_t, std::shared_ptr<Handler>> handlers_ MCDMA_GUARDED_BY(handlers_mu_);
  std::map<std::string, uint64_t, std::less<>> service_ids_ MCDMA_GUARDED_BY(handlers_mu_);

  // Handler threads (options.handler_threads > 0).
  Mutex work_mu_;
  std::condition_variable work_cv_;
  std::deque<shm::EventDesc> work_ MCDMA_GUARDED_BY(work_mu_);
  // work_.size(), readable without the lock: an idle handler thread spins
  // on it for spin_budget before it sleeps on work_cv_.
  std::atomic<uint32_t> work_queued_{0};
  std::vector<std::thread> workers_;

  // How long waits lately took (wait::WaitEstimate): a blocking Wait for a
  // completion, the progress thread's and the handler threads' idle gaps
  // between events. Each stretches its spin before sleeping where waits
  // are short (a ping-pong's), and leaves spin_budget where they are not.
  wait::WaitEstimate completion_wait_;
  wait::WaitEstimate progress_gap_;
  wait::WaitEstimate handler_gap_;

  std::atomic<bool> stop_{false};
  std::atomic<bool> closed_{false};
  Code closed_code_ MCDMA_GUARDED_BY(ops_mu_) = Code::kUnavailable;
  std::string closed_message_ MCDMA_GUARDED_BY(ops_mu_);
  std::thread progress_;
  std::thread stream_thread_;
  std::once_flag shutdown_once_;
};

// Maps a gRPC status from the daemon back to a Status with its mcdma Code.
Status FromGrpc(const grpc::Status& s);

}  // namespace mcdma::internal
