// TcpConnection: post-time checks and limits, and Poll.
#include "driver/tcp/tcp_connection.hpp"

#include <limits>
#include <mutex>
#include <string>
#include <utility>

#include "driver/post_checks.hpp"

namespace mcdma::driver::tcp {
namespace {}  // namespace

TcpConnection::~TcpConnection() { core_->io.Close(shared_); }

Status TcpConnection::CheckUp(const char* op) const {
  if (!shared_->down.load(std::memory_order_acquire)) return Status::Ok();
  return Status(Code::kLinkDown,
                PostMessage(op, "the connection is down: " + shared_->DownDetail()));
}

Status TcpConnection::PostSend(uint64_t wr_id, const LocalSlice& src) {
  constexpr const char* kOp = "PostSend";
  MCDMA_RETURN_IF_ERROR(CheckUp(kOp));
  MCDMA_ASSIGN_OR_RETURN(uint64_t region_id, core_->registry.CheckLocal(kOp, src));
  MCDMA_RETURN_IF_ERROR(
      CheckPostLength(kOp, src.length, caps().max_transfer_bytes, "max_transfer_bytes"));
  MCDMA_RETURN_IF_ERROR(CheckPostRoom(kOp, send_outstanding_, caps().max_outstanding));
  core_->io.Post(shared_, {.wr_id = wr_id,
                           .op = WorkOp::kSend,
                           .region_id = region_id,
                           .offset = src.offset,
                           .length = src.length,
                           .remote = {}});
  ++send_outstanding_;
  return Status::Ok();
}

Status TcpConnection::PostRecv(uint64_t wr_id, const LocalSlice& dst) {
  constexpr const char* kOp = "PostRecv";
  MCDMA_RETURN_IF_ERROR(CheckUp(kOp));
  MCDMA_ASSIGN_OR_RETURN(uint64_t region_id, core_->registry.CheckLocal(kOp, dst));
  MCDMA_RETURN_IF_ERROR(CheckPostLength(kOp, dst.length, kMaxRequestBytes, "the 32-bit length"));
  MCDMA_RETURN_IF_ERROR(CheckPostRoom(kOp, recv_outstanding_, caps().max_outstanding));
  core_->io.Post(shared_, {.wr_id = wr_id,
                           .op = WorkOp::kRecv,
                           .region_id = region_id,
                           .offset = dst.offset,
                           .length = dst.length,
                           .remote = {}});
  ++recv_outstanding_;
  return Status::Ok();
}

Status TcpConnection::PostWrite(uint64_t wr_id, const LocalSlice& src, const RemoteSlice& dst) {
  constexpr const char* kOp = "PostWrite";
  MCDMA_RETURN_IF_ERROR(CheckUp(kOp));
  if (!caps().one_sided) {
    return Status(Code::kInvalid,
                  PostMessage(kOp, "profile '" + caps().profile + "' has no one-sided operations"));
  }
  MCDMA_ASSIGN_OR_RETURN(uint64_t region_id, core_->registry.CheckLocal(kOp, src));
  MCDMA_RETURN_IF_ERROR(
      CheckPostLength(kOp, src.length, caps().max_transfer_bytes, "max_transfer_bytes"));
  MCDMA_RETURN_IF_ERROR(CheckPostRoom(kOp, send_outstanding_, caps().max_outstanding));
  core_->io.Post(shared_, {.wr_id = wr_id,
                           .op = WorkOp::kWrite,
                           .region_id = region_id,
                           .offset = src.offset,
                           .length = src.length,
                           .remote = dst});
  ++send_outstanding_;
  return Status::Ok();
}

Status TcpConnection::PostRead(uint64_t wr_id, const LocalSlice& dst, const RemoteSlice& src) {
  constexpr const char* kOp = "PostRead";
  MCDMA_RETURN_IF_ERROR(CheckUp(kOp));
  if (!caps().one_sided || caps().max_outstanding_reads == 0) {
    return Status(Code::kInvalid,
                  PostMessage(kOp, "profile '" + caps().profile + "' allows no RDMA READ"));
  }
  MCDMA_ASSIGN_OR_RETURN(uint64_t region_id, core_->registry.CheckLocal(kOp, dst));
  MCDMA_RETURN_IF_ERROR(CheckPostLength(kOp, dst.length, caps().max_read_bytes, "max_read_bytes"));
  MCDMA_RETURN_IF_ERROR(CheckPostRoom(kOp, send_outstanding_, caps().max_outstanding));
  if (reads_outstanding_ >= caps().max_outstanding_reads) {
    return Status(Code::kBusy, PostMessage(kOp, "max_outstanding_reads (" +
                                                    std::to_string(caps().max_outstanding_reads) +
                                                    ") READs in flight; reap completions first"));
  }
  core_->io.Post(shared_, {.wr_id = wr_id,
                           .op = WorkOp::kRead,
                           .region_id = region_id,
                           .offset = dst.offset,
                           .length = dst.length,
                           .remote = src});
  ++send_outstanding_;
  ++reads_outstanding_;
  return Status::Ok();
}

size_t TcpConnection::Poll(std::span<WorkCompletion> out) {
  size_t reaped = 0;
  std::lock_guard lock(shared_->mu);
  while (reaped < out.size() && !shared_->completions.empty()) {
    WorkCompletion& wc = shared_->completions.front();
    if (wc.op == WorkOp::kRecv) {
      --recv_outstanding_;
    } else {
      --send_outstanding_;
      if (wc.op == WorkOp::kRead) --reads_outstanding_;
    }
    out[reaped++] = std::move(wc);
    shared_->completions.pop_front();
  }
  return reaped;
}

}  // namespace mcdma::driver::tcp
