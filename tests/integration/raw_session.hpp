// RawSession: a session with mcdma-rpcd opened with the wire contracts only
// (gRPC OpenSession + the shared-memory layout), without libmcdma's threads,
// so a test can put arbitrary descriptors into the submission ring and read
// every completion itself.
//
// Why not a libmcdma Client plus mailbox_for_testing(): the library's
// progress thread consumes the completion ring (cq_head) and, for every
// error completion it cannot match to one of its own ops, publishes a RELEASE
// from its private copy of sq_tail. Descriptors written beside it would race
// with both (lost completions, overwritten ring slots), so the test would be
// nondeterministic. Here one thread owns everything.
//
// Threading: one thread (the test body). Not thread-safe.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <optional>
#include <string>

#include "mcdma/status.hpp"
#include "mcdma/v1/control.grpc.pb.h"
#include "mcdma_internal/mailbox_layout.hpp"
#include "mcdma_internal/shm_segment.hpp"
#include "test_util.hpp"

namespace mcdma::itest {

class RawSession {
 public:
  static std::unique_ptr<RawSession> Open(const std::string& socket, std::string* error);
  ~RawSession();

  uint64_t session_id() const { return session_id_; }
  shm::MailboxHeader* header() const { return header_; }
  const shm::MailboxGeometry& geometry() const { return geo_; }
  std::byte* arena() const { return arena_; }
  uint32_t sq_tail() const { return sq_tail_; }

  // Writes `d` at the private tail, publishes the tail and rings the daemon.
  // A zero tag is replaced by a fresh one. Returns the tag.
  uint64_t Submit(shm::SubmitDesc d);
  // Stores an arbitrary value in the shared sq_tail word (and adopts it as
  // the private tail), then rings: the ring-fault tests.
  void PublishTail(uint32_t tail);

  struct Event {
    shm::EventDesc desc{};
    std::string payload;  // copied out; the range is released to the daemon
  };
  // The next completion-ring event, waiting (sleeping 1 ms steps) up to
  // `timeout`; nullopt if none came.
  std::optional<Event> NextEvent(Millis timeout);
  // Completion events queued right now (after a grace period): for "no more
  // completions" checks.
  size_t PendingEvents() const;

  // A CALL of `request` (copied into the app half at offset 0) to
  // `service_id`, and its completion.
  std::optional<Event> Call(uint64_t service_id, std::string_view request, Millis timeout);

  // Control plane (unary gRPC, authorized by the session token).
  Result<uint64_t> LookupService(const std::string& name);
  Result<v1::ResolveReply> Resolve(const std::string& name);
  struct Buffer {
    uint64_t id = 0;
    ShmSegment segment;
  };
  Result<Buffer> Alloc(uint64_t size);
  // Alloc without mapping the segment or saying Mapped: the daemon keeps
  // the name linked (until attach_timeout_ms). The segment's name.
  Result<std::string> AllocUnmapped(uint64_t size);
  // Exports the whole buffer, readable, under `name`.
  Status Export(uint64_t buffer_id, const std::string& name);

 private:
  RawSession() = default;
  v1::SessionRef Ref() const;
  grpc::ClientContext* Deadline(grpc::ClientContext& ctx) const;

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Control::Stub> stub_;
  grpc::ClientContext stream_ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::SessionRequest, v1::SessionEvent>> stream_;
  uint64_t session_id_ = 0;
  std::string token_;
  ShmSegment mailbox_;
  shm::MailboxGeometry geo_{};
  shm::MailboxHeader* header_ = nullptr;
  shm::SubmitDesc* sq_ = nullptr;
  shm::EventDesc* cq_ = nullptr;
  std::byte* arena_ = nullptr;
  uint32_t sq_tail_ = 0;
  uint32_t cq_head_ = 0;
  uint64_t next_tag_ = 1000;
};

}  // namespace mcdma::itest
