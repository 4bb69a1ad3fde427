// TcpConnection: the state and local-slice checks of a post (the others are
// CheckedConnection's), the hand-off to the I/O thread, and Poll.
#include "driver/tcp/tcp_connection.hpp"

#include <string>
#include <utility>

#include "driver/post_checks.hpp"
#include "mcdma_internal/thread_annotations.hpp"

namespace mcdma::driver::tcp {

TcpConnection::~TcpConnection() { core_->io.Close(shared_); }

Status TcpConnection::CheckState(const char* op, WorkOp kind) const {
  (void)kind;
  if (!shared_->down.load(std::memory_order_acquire)) return Status::Ok();
  return Status(Code::kLinkDown,
                PostMessage(op, "the connection is down: " + shared_->DownDetail()));
}

Result<uint64_t> TcpConnection::CheckLocal(const char* op, const LocalSlice& slice) const {
  return core_->registry.CheckLocal(op, slice);
}

void TcpConnection::Enqueue(const PostedRequest& request) { core_->io.Post(shared_, request); }

void TcpConnection::Abandon() {
  if (abandoned_) return;
  abandoned_ = true;
  // Marked here too, so that a post after Abandon fails at once rather
  // than reaching the I/O thread; the I/O thread's own MarkDown keeps this
  // detail (the first one wins).
  shared_->MarkDown("the connection was abandoned (its path failed)");
  core_->io.Reset(shared_);
}

size_t TcpConnection::Poll(std::span<WorkCompletion> out) {
  MutexLock lock(shared_->mu);
  return Reap(shared_->completions, out);
}

}  // namespace mcdma::driver::tcp
