// State the engine thread and the tcp I/O thread share: posted requests on
// their way in, completions on their way out, and the rendezvous where
// accepted sockets meet the endpoints waiting for them.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <string>

#include "driver/post_checks.hpp"
#include "driver/tcp/tcp_frame.hpp"
#include "driver/tcp/tcp_socket.hpp"
#include "driver/transport.hpp"
#include "mcdma/status.hpp"
#include "mcdma_internal/thread_annotations.hpp"

namespace mcdma::driver::tcp {

// A request as the engine posted it, checked, with its local memory named
// by registration id in local_key (see tcp_registry.hpp).
using Request = PostedRequest;

// One connection's mailbox between the threads. The I/O thread appends
// completions and marks the link down; the engine's Poll drains them.
struct ConnShared {
  // Set once: by the I/O thread, after every request it knew of completed,
  // or by the engine's Connection::Abandon (the I/O thread then completes
  // what it knew of). Read only by the post-time checks.
  std::atomic<bool> down{false};
  Mutex mu;
  std::deque<WorkCompletion> completions MCDMA_GUARDED_BY(mu);
  std::string down_detail MCDMA_GUARDED_BY(mu);

  void Push(WorkCompletion wc) MCDMA_EXCLUDES(mu) {
    MutexLock lock(mu);
    completions.push_back(std::move(wc));
  }
  void MarkDown(const std::string& detail) MCDMA_EXCLUDES(mu) {
    MutexLock lock(mu);
    if (!down.load(std::memory_order_relaxed)) down_detail = detail;
    down.store(true, std::memory_order_release);
  }
  std::string DownDetail() MCDMA_EXCLUDES(mu) {
    MutexLock lock(mu);
    return down_detail;
  }
};

// Endpoints waiting for their peer to dial in, by token. The I/O thread
// parks a socket whose HELLO named an open endpoint; that endpoint's Connect
// (engine thread) collects it. Thread-safe.
class Rendezvous {
 public:
  struct Arrival {
    Fd fd;
    Token sender{};
  };

  // CreateEndpoint: the token may now be dialled.
  void Open(const Token& token) MCDMA_EXCLUDES(mu_);
  // The endpoint was consumed or destroyed: later dials naming it are
  // refused, and a socket parked on it is closed.
  void Close(const Token& token) MCDMA_EXCLUDES(mu_);
  // I/O thread: parks `fd` on the open endpoint `target`. False (fd left
  // with the caller) when no endpoint is open under that token or a socket
  // is already parked there.
  bool Offer(const Token& target, const Token& sender, Fd& fd) MCDMA_EXCLUDES(mu_);
  // Connect: waits for a socket parked on `token`; kTimeout at the
  // deadline, kLinkDown once the device is shutting down.
  Result<Arrival> Await(const Token& token, Deadline deadline) MCDMA_EXCLUDES(mu_);
  // The device is being destroyed: refuse everything, wake waiters.
  void Shutdown() MCDMA_EXCLUDES(mu_);

 private:
  struct Slot {
    Fd fd;
    Token sender{};
  };
  Mutex mu_;
  std::condition_variable arrived_;
  std::map<Token, Slot> slots_ MCDMA_GUARDED_BY(mu_);
  bool shut_ MCDMA_GUARDED_BY(mu_) = false;
};

}  // namespace mcdma::driver::tcp
