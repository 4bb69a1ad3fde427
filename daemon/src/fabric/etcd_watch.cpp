// EtcdClient::Watch: a watch on a prefix, read on its own thread, and
// EtcdClient::WatchPrefix, which creates one. The unary calls are in
// etcd_client.cpp; what both use is in etcd_internal.hpp.
#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <thread>

#include "etcd/rpc.grpc.pb.h"
#include "fabric/etcd_client.hpp"
#include "fabric/etcd_internal.hpp"
#include "mcdma_internal/thread_annotations.hpp"

namespace mcdma::daemon::fabric {

// What a watch's thread and its owner share. The thread holds a reference,
// so the state outlives a Watch destroyed by its own callbacks.
struct EtcdClient::Watch::State {
  enum class Phase { kCreating, kCreated, kRunning, kEnded };

  std::string target;  // for messages
  std::string op;      // "watch PREFIX"
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::Watch::Stub> watch_api;  // gRPC's generated client
  pb::WatchCreateRequest create;
  // Called on the thread only; on_end at most once.
  EventsFn on_events;
  EndFn on_end;
  // Thread-safe (TryCancel from any thread); used by the thread otherwise.
  grpc::ClientContext ctx;

  Mutex mu;
  std::condition_variable cv;
  Phase phase MCDMA_GUARDED_BY(mu) = Phase::kCreating;
  bool cancelled MCDMA_GUARDED_BY(mu) = false;
  // Why the watch was not created (phase kEnded before kRunning).
  Status create_error MCDMA_GUARDED_BY(mu);
  int create_grpc_code MCDMA_GUARDED_BY(mu) = 0;

  // The thread: the stream from the create request to its end.
  void Run();
  // Reads until the watch ends; why it ended.
  Status ReadLoop(grpc::ClientReaderWriter<pb::WatchRequest, pb::WatchResponse>& stream,
                  grpc::Status* broken) MCDMA_EXCLUDES(mu);
  // The store created the watch: waits for the owner to take it. False
  // when cancelled meanwhile.
  bool OnCreated() MCDMA_EXCLUDES(mu);
  bool Cancelled() MCDMA_EXCLUDES(mu) {
    MutexLock lock(mu);
    return cancelled;
  }
  void End(const Status& why, int grpc_code) MCDMA_EXCLUDES(mu);
};

bool EtcdClient::Watch::State::OnCreated() {
  MutexLock lock(mu);
  if (cancelled) return false;
  phase = Phase::kCreated;
  cv.notify_all();
  // The owner answers at once (WatchPrefix returns): no callback runs
  // before the caller holds its Watch.
  cv.wait(lock.native(),
          [&]() MCDMA_REQUIRES(mu) { return phase == Phase::kRunning || cancelled; });
  return !cancelled;
}

Status EtcdClient::Watch::State::ReadLoop(
    grpc::ClientReaderWriter<pb::WatchRequest, pb::WatchResponse>& stream, grpc::Status* broken) {
  pb::WatchResponse rep;
  bool created = false;
  while (stream.Read(&rep)) {
    if (rep.created() && !created) {
      created = true;
      if (!OnCreated()) return Status(Code::kCancelled, op + ": cancelled");
    }
    if (rep.compact_revision() != 0) {
      return Status(kEtcdCompacted, "etcd " + target + ": " + op + ": revision " +
                                        std::to_string(create.start_revision()) +
                                        " was compacted (the store keeps history from " +
                                        std::to_string(rep.compact_revision()) +
                                        "); list again and watch from there");
    }
    if (rep.canceled()) {
      return Status(
          Code::kUnavailable,
          "etcd " + target + ": " + op + ": the store cancelled the watch: " + rep.cancel_reason());
    }
    if (!created || (rep.created() && rep.events().empty())) continue;
    std::vector<EtcdEvent> events;
    events.reserve(rep.events_size());
    for (const mvccpb::Event& ev : rep.events()) {
      MCDMA_ASSIGN_OR_RETURN(EtcdKv kv,
                             etcd_internal::FromStore(ev.kv(), "etcd " + target + ": " + op));
      events.push_back(EtcdEvent{
          ev.type() == mvccpb::Event::DELETE ? EtcdEvent::Type::kDelete : EtcdEvent::Type::kPut,
          std::move(kv)});
    }
    if (Cancelled()) return Status(Code::kCancelled, op + ": cancelled");
    on_events(events, rep.header().revision());
  }
  *broken = stream.Finish();
  if (broken->ok()) {
    return Status(Code::kUnavailable,
                  "etcd " + target + ": " + op + ": the store ended the stream");
  }
  return etcd_internal::FromEtcdGrpc(*broken, target, op);
}

void EtcdClient::Watch::State::Run() {
  auto stream = watch_api->Watch(&ctx);
  pb::WatchRequest req;
  *req.mutable_create_request() = create;
  grpc::Status broken;
  Status why;
  if (!stream->Write(req)) {
    broken = stream->Finish();
    why = broken.ok() ? Status(Code::kUnavailable, "etcd " + target + ": " + op + ": no stream")
                      : etcd_internal::FromEtcdGrpc(broken, target, op);
  } else {
    why = ReadLoop(*stream, &broken);
    if (broken.ok()) {  // ended here, not by the stream: close it
      ctx.TryCancel();
      pb::WatchResponse rest;
      while (stream->Read(&rest)) {
      }
      (void)stream->Finish();
    }
  }
  End(why, broken.error_code());
}

void EtcdClient::Watch::State::End(const Status& why, int grpc_code) {
  MutexLock lock(mu);
  Phase was = phase;
  phase = Phase::kEnded;
  if (was == Phase::kCreating) {  // the owner is waiting in WatchPrefix
    create_error = why;
    create_grpc_code = grpc_code;
    cv.notify_all();
    return;
  }
  if (cancelled) return;
  EndFn end = std::move(on_end);
  lock.Unlock();
  if (end) end(why);
}

EtcdClient::Watch::Watch(std::shared_ptr<State> state) : state_(std::move(state)) {}

EtcdClient::Watch::~Watch() { Cancel(); }

void EtcdClient::Watch::Cancel() {
  {
    MutexLock lock(state_->mu);
    state_->cancelled = true;
    state_->cv.notify_all();
  }
  state_->ctx.TryCancel();
  if (!thread_.joinable()) return;
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();  // a callback cancelled its own watch: the thread ends on its own
  } else {
    thread_.join();
  }
}

Result<std::unique_ptr<EtcdClient::Watch>> EtcdClient::WatchPrefix(const std::string& prefix,
                                                                   int64_t start_revision,
                                                                   EventsFn on_events,
                                                                   EndFn on_end) {
  if (channels_.empty()) return Status(Code::kInvalid, "etcd watch: no endpoints");
  if (prefix.size() > kMaxKeyBytes) return etcd_internal::CheckKey(prefix, "watch");
  size_t index = current_.load(std::memory_order_relaxed) % channels_.size();
  const Endpoint& ep = *channels_[index];
  auto state = std::make_shared<Watch::State>();
  state->target = ep.target;
  state->op = "watch " + etcd_internal::Shown(prefix);
  state->channel = ep.channel;
  state->watch_api = pb::Watch::NewStub(ep.channel);
  state->create.set_key(etcd_internal::PrefixStart(prefix));
  state->create.set_range_end(etcd_internal::PrefixEnd(prefix));
  state->create.set_start_revision(start_revision);
  state->create.set_progress_notify(true);
  state->on_events = std::move(on_events);
  state->on_end = std::move(on_end);
  // etcd's "require leader": a member cut off from its cluster's leader
  // cancels the stream instead of leaving the watch silent.
  state->ctx.AddMetadata("hasleader", "true");
  state->ctx.set_wait_for_ready(true);  // as Unary does, and why

  std::unique_ptr<Watch> watch(new Watch(state));
  watch->thread_ = std::thread([state] { state->Run(); });
  MutexLock lock(state->mu);
  bool answered = state->cv.wait_for(lock.native(), rpc_timeout_, [&]() MCDMA_REQUIRES(state->mu) {
    return state->phase != Watch::State::Phase::kCreating;
  });
  if (answered && state->phase == Watch::State::Phase::kCreated) {
    state->phase = Watch::State::Phase::kRunning;
    state->cv.notify_all();
    return watch;
  }
  Status error = answered
                     ? state->create_error
                     : etcd_internal::FromEtcdGrpc(
                           grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "not created in time"),
                           ep.target, state->op, ep.channel.get(), rpc_timeout_);
  int grpc_code =
      answered ? state->create_grpc_code : static_cast<int>(grpc::StatusCode::DEADLINE_EXCEEDED);
  lock.Unlock();
  watch->Cancel();
  OnFailure(index, grpc_code);
  return error;
}

}  // namespace mcdma::daemon::fabric
