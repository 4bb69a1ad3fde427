#include "fabric/etcd_client.hpp"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <cstdio>
#include <thread>

#include "etcd/rpc.grpc.pb.h"
#include "mcdma_internal/thread_annotations.hpp"

namespace mcdma::daemon::fabric {
namespace pb = etcdserverpb;

namespace {

constexpr size_t kMaxEndpoints = 16;
constexpr size_t kMaxShownKey = 96;

std::chrono::system_clock::time_point Deadline(std::chrono::milliseconds timeout) {
  return std::chrono::system_clock::now() + timeout;
}

// A key as a person reads it in a message: printable ASCII kept, other
// bytes as \xNN, long keys cut.
std::string Shown(std::string_view key) {
  std::string out;
  for (unsigned char c : key.substr(0, kMaxShownKey)) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char hex[5];
      std::snprintf(hex, sizeof(hex), "\\x%02x", c);
      out += hex;
    }
  }
  if (key.size() > kMaxShownKey) out += "...";
  return out;
}

std::string LeaseName(int64_t lease) {
  char hex[24];
  std::snprintf(hex, sizeof(hex), "%llx", static_cast<unsigned long long>(lease));
  return std::string("lease ") + hex;
}

// The end of the range holding every key that starts with `prefix`: the
// prefix with its last byte below 0xff incremented and what follows it
// dropped; "\0" (every key from `prefix` on) when there is none.
std::string PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    auto last = static_cast<unsigned char>(end.back());
    if (last < 0xff) {
      end.back() = static_cast<char>(last + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

// The key that starts a prefix range: an empty prefix is every key ("\0").
std::string PrefixStart(const std::string& prefix) {
  return prefix.empty() ? std::string(1, '\0') : prefix;
}

const char* StateName(grpc_connectivity_state state) {
  switch (state) {
    case GRPC_CHANNEL_IDLE:
      return "idle";
    case GRPC_CHANNEL_CONNECTING:
      return "connecting";
    case GRPC_CHANNEL_READY:
      return "ready";
    case GRPC_CHANNEL_TRANSIENT_FAILURE:
      return "failing to connect";
    default:
      return "shut down";
  }
}

// `channel`: where a call that ran out of time waited for a connection
// (wait_for_ready); not connected then, the store was unreachable rather
// than slow.
Status FromEtcdGrpc(const grpc::Status& s, const std::string& target, const std::string& op,
                    grpc::Channel* channel = nullptr,
                    std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) {
  if (s.ok()) return Status::Ok();
  std::string m = "etcd " + target + ": " + op + ": " + s.error_message();
  if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED && channel != nullptr) {
    grpc_connectivity_state state = channel->GetState(false);
    if (state != GRPC_CHANNEL_READY) {
      return Status(Code::kUnavailable, "etcd " + target + ": " + op + ": unreachable (no " +
                                            "connection within " + std::to_string(timeout.count()) +
                                            " ms; " + StateName(state) + ")");
    }
  }
  switch (s.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      return Status(Code::kUnavailable, m);
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return Status(Code::kTimeout, m);
    case grpc::StatusCode::NOT_FOUND:
      return Status(Code::kNotFound, m);
    case grpc::StatusCode::ALREADY_EXISTS:
      return Status(Code::kAlreadyExists, m);
    case grpc::StatusCode::OUT_OF_RANGE:  // a compacted or future revision
      return Status(Code::kOutOfRange, m);
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
      return Status(Code::kInvalid, m);
    case grpc::StatusCode::RESOURCE_EXHAUSTED:  // a reply over kMaxReplyBytes, a full store
      return Status(Code::kNoMemory, m);
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED:
      return Status(Code::kPermissionDenied, m);
    case grpc::StatusCode::CANCELLED:
      return Status(Code::kCancelled, m);
    default:
      return Status(Code::kInternal,
                    m + " (gRPC " + std::to_string(static_cast<int>(s.error_code())) + ")");
  }
}

Status CheckKey(const std::string& key, const std::string& op) {
  if (key.empty()) return Status(Code::kInvalid, "etcd " + op + ": empty key");
  if (key.size() > kMaxKeyBytes) {
    return Status(Code::kInvalid, "etcd " + op + " " + Shown(key) + ": key of " +
                                      std::to_string(key.size()) + " bytes, over the limit of " +
                                      std::to_string(kMaxKeyBytes));
  }
  return Status::Ok();
}

Status CheckPut(const std::string& key, const std::string& value, const std::string& op) {
  MCDMA_RETURN_IF_ERROR(CheckKey(key, op));
  if (value.size() > kMaxValueBytes) {
    return Status(Code::kInvalid, "etcd " + op + " " + Shown(key) + ": value of " +
                                      std::to_string(value.size()) + " bytes, over the limit of " +
                                      std::to_string(kMaxValueBytes));
  }
  return Status::Ok();
}

// A pair the store sent, checked against the bounds.
Result<EtcdKv> FromStore(const mvccpb::KeyValue& kv, const std::string& where) {
  if (kv.key().size() > kMaxKeyBytes || kv.value().size() > kMaxValueBytes) {
    return Status(Code::kNoMemory,
                  where + ": the store sent " + Shown(kv.key()) + " with a " +
                      std::to_string(kv.key().size()) + "-byte key and a " +
                      std::to_string(kv.value().size()) + "-byte value, over the limits (" +
                      std::to_string(kMaxKeyBytes) + ", " + std::to_string(kMaxValueBytes) + ")");
  }
  return EtcdKv{kv.key(), kv.value(), kv.create_revision(), kv.mod_revision(), kv.lease()};
}

// One "host:port" of a URL, checked.
Status CheckEndpoint(std::string_view item, std::string_view url) {
  auto bad = [&](const std::string& why) {
    return Status(Code::kInvalid, "etcd URL '" + std::string(url) + "': " + why);
  };
  if (item.empty()) return bad("an empty endpoint");
  size_t colon = std::string_view::npos;
  std::string_view host;
  if (item.front() == '[') {  // [v6 address]:port
    size_t close = item.find(']');
    if (close == std::string_view::npos) return bad("'" + std::string(item) + "' lacks its ']'");
    host = item.substr(1, close - 1);
    if (close + 1 < item.size() && item[close + 1] == ':') colon = close + 1;
  } else {
    colon = item.rfind(':');
    if (colon != std::string_view::npos) host = item.substr(0, colon);
    if (host.find(':') != std::string_view::npos)
      return bad("'" + std::string(item) + "': put an IPv6 address in brackets");
  }
  if (colon == std::string_view::npos) return bad("'" + std::string(item) + "' has no port");
  if (host.empty()) return bad("'" + std::string(item) + "' has no host");
  for (char c : host) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_' &&
        c != ':') {
      return bad("'" + std::string(item) + "': bad character in the host");
    }
  }
  std::string_view port = item.substr(colon + 1);
  bool digits = !port.empty() && port.size() <= 5 &&
                std::all_of(port.begin(), port.end(),
                            [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
  if (!digits || std::stoi(std::string(port)) < 1 || std::stoi(std::string(port)) > 65535)
    return bad("'" + std::string(item) + "': the port must be 1-65535");
  return Status::Ok();
}

}  // namespace

Result<std::vector<std::string>> ParseEtcdUrl(std::string_view url) {
  if (url.empty()) return Status(Code::kInvalid, "etcd URL is empty");
  auto bad = [&](const std::string& why) {
    return Status(Code::kInvalid, "etcd URL '" + std::string(url) + "': " + why);
  };
  size_t sep = url.find("://");
  if (sep == std::string_view::npos) return bad("expected etcd://HOST:PORT[,HOST:PORT...]");
  std::string_view scheme = url.substr(0, sep);
  if (scheme == "https" || scheme == "etcds")
    return bad("TLS is not supported yet; use etcd:// or http://");
  if (scheme != "etcd" && scheme != "http")
    return bad("unknown scheme '" + std::string(scheme) + "'; expected etcd:// or http://");
  std::string_view rest = url.substr(sep + 3);
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find_first_of("/?#@") != std::string_view::npos)
    return bad("no path, query or user part is allowed");
  std::vector<std::string> endpoints;
  for (;;) {
    size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    MCDMA_RETURN_IF_ERROR(CheckEndpoint(item, url));
    if (endpoints.size() == kMaxEndpoints)
      return bad("more than " + std::to_string(kMaxEndpoints) + " endpoints");
    endpoints.emplace_back(item);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return endpoints;
}

// One endpoint's channel and stubs; fixed after the constructor.
struct EtcdClient::Endpoint {
  std::string target;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::KV::Stub> kv;
  std::unique_ptr<pb::Lease::Stub> lease;
};

EtcdClient::EtcdClient(std::vector<std::string> endpoints, Millis rpc_timeout)
    : endpoints_(std::move(endpoints)), rpc_timeout_(rpc_timeout) {
  grpc::ChannelArguments args;
  // Reconnect quickly once a member is back (as the peer channels do:
  // peer/peer_channel.cpp says why the minimum is the larger).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 5000);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetMaxReceiveMessageSize(kMaxReplyBytes);
  // A watch is quiet for as long as nothing changes: pings find a member
  // that went away without closing the connection. etcd refuses pings
  // closer than 5 s (--grpc-keepalive-min-time) and, with no call open,
  // any at all.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  for (const std::string& target : endpoints_) {
    auto ep = std::make_unique<Endpoint>();
    ep->target = target;
    ep->channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
    ep->kv = pb::KV::NewStub(ep->channel);
    ep->lease = pb::Lease::NewStub(ep->channel);
    channels_.push_back(std::move(ep));
  }
}

EtcdClient::~EtcdClient() = default;

void EtcdClient::OnFailure(size_t index, int grpc_code) {
  auto code = static_cast<grpc::StatusCode>(grpc_code);
  if (code != grpc::StatusCode::UNAVAILABLE && code != grpc::StatusCode::DEADLINE_EXCEEDED) return;
  size_t expected = index;
  current_.compare_exchange_strong(expected, (index + 1) % channels_.size());
}

template <typename Call>
Status EtcdClient::Unary(const std::string& op, Call call) {
  if (channels_.empty()) return Status(Code::kInvalid, "etcd " + op + ": no endpoints");
  size_t index = current_.load(std::memory_order_relaxed) % channels_.size();
  const Endpoint& ep = *channels_[index];
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(rpc_timeout_));
  // A call that waits for the connection is what drives the connection:
  // gRPC's synchronous API reads a connecting socket only while a call or
  // a wait polls it (else its backup poller, every 5 s). A fail-fast call
  // on a channel in backoff never reconnected to a restarted store.
  ctx.set_wait_for_ready(true);
  grpc::Status gs = call(ep, &ctx);
  if (gs.ok()) return Status::Ok();
  OnFailure(index, gs.error_code());
  return FromEtcdGrpc(gs, ep.target, op, ep.channel.get(), rpc_timeout_);
}

Result<int64_t> EtcdClient::Grant(std::chrono::seconds ttl) {
  if (ttl.count() < 1) return Status(Code::kInvalid, "etcd Grant: a TTL under 1 s");
  pb::LeaseGrantRequest req;
  req.set_ttl(ttl.count());
  pb::LeaseGrantResponse rep;
  MCDMA_RETURN_IF_ERROR(Unary("Grant", [&](const Endpoint& ep, grpc::ClientContext* ctx) {
    return ep.lease->LeaseGrant(ctx, req, &rep);
  }));
  if (!rep.error().empty() || rep.id() == 0) {
    return Status(Code::kInternal, "etcd Grant: the store granted no lease: " + rep.error());
  }
  return rep.id();
}

Result<int64_t> EtcdClient::KeepAliveOnce(int64_t lease) {
  const std::string op = "KeepAlive " + LeaseName(lease);
  pb::LeaseKeepAliveResponse rep;
  bool got = false;
  std::string target;
  MCDMA_RETURN_IF_ERROR(Unary(op, [&](const Endpoint& ep, grpc::ClientContext* ctx) {
    target = ep.target;
    auto stream = ep.lease->LeaseKeepAlive(ctx);
    pb::LeaseKeepAliveRequest req;
    req.set_id(lease);
    if (stream->Write(req)) got = stream->Read(&rep);
    stream->WritesDone();
    return stream->Finish();
  }));
  if (!got) {
    return Status(Code::kUnavailable,
                  "etcd " + target + ": " + op + ": the stream ended without a reply");
  }
  if (rep.ttl() <= 0) return Status(Code::kNotFound, "etcd " + op + ": expired or revoked");
  return rep.ttl();
}

Status EtcdClient::Revoke(int64_t lease) {
  pb::LeaseRevokeRequest req;
  req.set_id(lease);
  pb::LeaseRevokeResponse rep;
  return Unary("Revoke " + LeaseName(lease), [&](const Endpoint& ep, grpc::ClientContext* ctx) {
    return ep.lease->LeaseRevoke(ctx, req, &rep);
  });
}

Status EtcdClient::Put(const std::string& key, const std::string& value, int64_t lease) {
  MCDMA_RETURN_IF_ERROR(CheckPut(key, value, "Put"));
  pb::PutRequest req;
  req.set_key(key);
  req.set_value(value);
  req.set_lease(lease);
  pb::PutResponse rep;
  return Unary("Put " + Shown(key), [&](const Endpoint& ep, grpc::ClientContext* ctx) {
    return ep.kv->Put(ctx, req, &rep);
  });
}

Status EtcdClient::Create(const std::string& key, const std::string& value, int64_t lease) {
  MCDMA_RETURN_IF_ERROR(CheckPut(key, value, "Create"));
  pb::TxnRequest req;
  pb::Compare* absent = req.add_compare();
  absent->set_key(key);
  absent->set_target(pb::Compare::CREATE);
  absent->set_result(pb::Compare::EQUAL);
  absent->set_create_revision(0);
  pb::PutRequest* put = req.add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value(value);
  put->set_lease(lease);
  pb::TxnResponse rep;
  MCDMA_RETURN_IF_ERROR(Unary(
      "Create " + Shown(key),
      [&](const Endpoint& ep, grpc::ClientContext* ctx) { return ep.kv->Txn(ctx, req, &rep); }));
  if (!rep.succeeded())
    return Status(Code::kAlreadyExists, "etcd Create " + Shown(key) + ": the key exists");
  return Status::Ok();
}

Status EtcdClient::Delete(const std::string& key) {
  MCDMA_RETURN_IF_ERROR(CheckKey(key, "Delete"));
  pb::DeleteRangeRequest req;
  req.set_key(key);
  pb::DeleteRangeResponse rep;
  return Unary("Delete " + Shown(key), [&](const Endpoint& ep, grpc::ClientContext* ctx) {
    return ep.kv->DeleteRange(ctx, req, &rep);
  });
}

Result<EtcdListing> EtcdClient::List(const std::string& prefix) {
  const std::string op = "List " + Shown(prefix);
  if (prefix.size() > kMaxKeyBytes) return CheckKey(prefix, "List");
  pb::RangeRequest req;
  req.set_key(PrefixStart(prefix));
  req.set_range_end(PrefixEnd(prefix));
  req.set_sort_order(pb::RangeRequest::ASCEND);
  req.set_sort_target(pb::RangeRequest::KEY);
  req.set_limit(static_cast<int64_t>(kMaxListKeys) + 1);  // one more tells "too many"
  pb::RangeResponse rep;
  MCDMA_RETURN_IF_ERROR(Unary(op, [&](const Endpoint& ep, grpc::ClientContext* ctx) {
    return ep.kv->Range(ctx, req, &rep);
  }));
  if (rep.more() || static_cast<size_t>(rep.kvs_size()) > kMaxListKeys) {
    return Status(Code::kNoMemory, "etcd " + op + ": " + std::to_string(rep.count()) +
                                       " keys, over the limit of " + std::to_string(kMaxListKeys));
  }
  EtcdListing listing;
  listing.revision = rep.header().revision();
  listing.kvs.reserve(rep.kvs_size());
  for (const mvccpb::KeyValue& kv : rep.kvs()) {
    MCDMA_ASSIGN_OR_RETURN(EtcdKv checked, FromStore(kv, "etcd " + op));
    listing.kvs.push_back(std::move(checked));
  }
  return listing;
}

Status EtcdClient::Compact(int64_t revision) {
  pb::CompactionRequest req;
  req.set_revision(revision);
  req.set_physical(true);
  pb::CompactionResponse rep;
  return Unary(
      "Compact " + std::to_string(revision),
      [&](const Endpoint& ep, grpc::ClientContext* ctx) { return ep.kv->Compact(ctx, req, &rep); });
}

// What a watch's thread and its owner share. The thread holds a reference,
// so the state outlives a Watch destroyed by its own callbacks.
struct EtcdClient::Watch::State {
  enum class Phase { kCreating, kCreated, kRunning, kEnded };

  std::string target;  // for messages
  std::string op;      // "watch PREFIX"
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::Watch::Stub> stub;
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
      MCDMA_ASSIGN_OR_RETURN(EtcdKv kv, FromStore(ev.kv(), "etcd " + target + ": " + op));
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
  return FromEtcdGrpc(*broken, target, op);
}

void EtcdClient::Watch::State::Run() {
  auto stream = stub->Watch(&ctx);
  pb::WatchRequest req;
  *req.mutable_create_request() = create;
  grpc::Status broken;
  Status why;
  if (!stream->Write(req)) {
    broken = stream->Finish();
    why = broken.ok() ? Status(Code::kUnavailable, "etcd " + target + ": " + op + ": no stream")
                      : FromEtcdGrpc(broken, target, op);
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
  if (prefix.size() > kMaxKeyBytes) return CheckKey(prefix, "watch");
  size_t index = current_.load(std::memory_order_relaxed) % channels_.size();
  const Endpoint& ep = *channels_[index];
  auto state = std::make_shared<Watch::State>();
  state->target = ep.target;
  state->op = "watch " + Shown(prefix);
  state->channel = ep.channel;
  state->stub = pb::Watch::NewStub(ep.channel);
  state->create.set_key(PrefixStart(prefix));
  state->create.set_range_end(PrefixEnd(prefix));
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
  Status error =
      answered
          ? state->create_error
          : FromEtcdGrpc(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "not created in time"),
                         ep.target, state->op, ep.channel.get(), rpc_timeout_);
  int grpc_code =
      answered ? state->create_grpc_code : static_cast<int>(grpc::StatusCode::DEADLINE_EXCEEDED);
  lock.Unlock();
  watch->Cancel();
  OnFailure(index, grpc_code);
  return error;
}

}  // namespace mcdma::daemon::fabric
