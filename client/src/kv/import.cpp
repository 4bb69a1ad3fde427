// kv::Import: the consumer side of a KV hand-off (docs/protocol.md §18.5).
#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <optional>
#include <random>
#include <thread>
#include <utility>

#include "kv/wire.hpp"
#include "mcdma/kv.hpp"
#include "mcdma_internal/thread_annotations.hpp"

namespace mcdma::kv {
namespace {

using google::protobuf::Struct;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// How often a consumer waiting for the next layer checks that the producer
// is still there (a dead producer sends nothing).
constexpr milliseconds kProbe{1000};
constexpr milliseconds kCallCap{10000};
// Events queued for the pulling thread. A producer sends one per layer and
// one at the end; more than this is a broken or hostile producer.
constexpr size_t kMaxQueued = 2 * kMaxLayers + 16;
// Layer reads in flight at once (ImportImpl::Run).
constexpr size_t kWindow = 2;

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string RandomHex12() {
  std::random_device rd;
  std::uniform_int_distribution<uint64_t> dist(0, (uint64_t{1} << 48) - 1);
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%012llx", static_cast<unsigned long long>(dist(rd)));
  return buf;
}

}  // namespace

namespace internal {

// The notifications of one consumer, from the handler thread to the puller.
struct Inbox {
  Mutex mu;
  std::condition_variable cv;
  std::deque<std::string> events MCDMA_GUARDED_BY(mu);
  bool overflow MCDMA_GUARDED_BY(mu) = false;
  bool closed MCDMA_GUARDED_BY(mu) = false;  // Close() was called
};

struct ImportImpl {
  Client* client = nullptr;
  std::string id;
  std::string peer;     // empty: this host
  std::string service;  // the producer's service as this client calls it
  std::string host;     // this client's host
  Clock::time_point started;
  Clock::time_point deadline;
  bool verify = true;

  std::shared_ptr<Inbox> inbox = std::make_shared<Inbox>();
  std::string notify;  // our notification service
  uint64_t notify_id = 0;

  std::string manifest_json;
  std::vector<uint64_t> sizes;
  std::vector<std::optional<RemoteBuffer>> remotes;  // resolved just before its read
  std::vector<Buffer> buffers;
  std::deque<uint32_t> pending;
  std::vector<std::optional<std::optional<uint64_t>>> checksums;  // per layer: known event?

  mutable Mutex mu;
  std::condition_variable landed_cv;
  std::vector<bool> landed MCDMA_GUARDED_BY(mu);
  size_t landed_count MCDMA_GUARDED_BY(mu) = 0;
  std::optional<Status> error MCDMA_GUARDED_BY(mu);
  ImportStats stats MCDMA_GUARDED_BY(mu);
  bool pulled MCDMA_GUARDED_BY(mu) = false;
  bool pulling MCDMA_GUARDED_BY(mu) = false;
  bool closed MCDMA_GUARDED_BY(mu) = false;

  Status Named(Code code, Reason reason, const std::string& what) const {
    return Status(code, reason, "hand-off " + id + ": " + what);
  }
  // An mcdma error met while pulling, as the hand-off error it means.
  Status Failure(const Status& e, const std::string& what) const {
    if (e.reason() >= Reason::kHandoffManifest) return e;  // one of ours already
    std::string text = "hand-off " + id + ": " + what + ": " + e.message();
    switch (e.code()) {
      case Code::kLinkDown:
        return Status(Code::kLinkDown, text);
      case Code::kNotFound:
      case Code::kPeerGone:
        return Status(Code::kPeerGone, Reason::kHandoffProducerGone, text);
      case Code::kRevoked:
        return Status(Code::kRevoked, Reason::kHandoffRevoked, text);
      case Code::kTimeout:
        return Status(Code::kTimeout, text);
      default:
        return Status(e.code(), e.reason(), text);
    }
  }
  Result<milliseconds> Left() const MCDMA_EXCLUDES(mu) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      size_t got;
      {
        MutexLock lock(mu);
        got = landed_count;
      }
      return Status(Code::kTimeout, "hand-off " + id + ": " + std::to_string(got) + " of " +
                                        std::to_string(sizes.empty() ? 0 : sizes.size()) +
                                        " layers landed before the deadline");
    }
    return left;
  }
  Result<Struct> Call(const Struct& message) const {
    auto left = Left();
    if (!left.ok()) return left.status();
    auto reply = client->Call(service, wire::ToJson(message), std::min(*left, kCallCap));
    if (!reply.ok()) return reply.status();
    return wire::ParseObject(reply->view(), "hand-off reply");
  }
  // OK for state "open"; the hand-off error its end means otherwise.
  Status EndedError(const Struct& reply) const {
    auto state = wire::String(wire::Field(reply, "state"));
    std::string reason = wire::String(wire::Field(reply, "reason")).value_or("").substr(0, 512);
    if (state == "open") return Status::Ok();
    if (state == "expired") {
      return Status(Code::kRevoked, Reason::kHandoffExpired,
                    "hand-off " + id + " expired: " + reason);
    }
    if (state == "closed" || state == "revoked") {
      return Status(Code::kRevoked, Reason::kHandoffRevoked,
                    "hand-off " + id + " " + *state + ": " + reason);
    }
    return Status(Code::kInvalid,
                  "hand-off " + id + ": unknown state '" + state.value_or("").substr(0, 32) + "'");
  }
  // Layer `layer`'s export, resolved on first use: each resolve is a round
  // trip to the producer's host, so they run while earlier layers move.
  Result<RemoteBuffer> Remote(uint32_t layer) {
    std::optional<RemoteBuffer>& slot = remotes[layer];
    if (slot.has_value()) return *slot;
    auto r = client->Resolve(wire::ExportName(id, layer), peer);
    if (!r.ok()) return Failure(r.status(), "resolving layer " + std::to_string(layer));
    slot = *r;
    if (r->length < sizes[layer]) {
      return Named(Code::kInvalid, Reason::kHandoffManifest,
                   "layer " + std::to_string(layer) + " export holds " + std::to_string(r->length) +
                       " bytes, the manifest says " + std::to_string(sizes[layer]));
    }
    return *r;
  }
  Status Probe() const {
    Struct status;
    (*status.mutable_fields())["op"] = wire::Str("status");
    auto reply = Call(status);
    if (!reply.ok()) return Failure(reply.status(), "the producer does not answer");
    return EndedError(*reply);
  }
  Result<Struct> OpenCall(milliseconds open_wait);
  Status Prepare(const ImportOptions& options, const wire::Manifest& manifest);
  // Sizes the per-layer records for `n` layers and queues the layers the
  // open reply says are published. Import::Open calls it before it hands
  // the Import out, so no other thread can see the members under mu yet.
  void TrackLayers(uint32_t n,
                   const std::vector<wire::LayerEvent>& published) MCDMA_NO_THREAD_SAFETY_ANALYSIS;
  // The next published layer; nullopt when `block` is false and none waits.
  Result<std::optional<uint32_t>> NextEvent(bool block) MCDMA_EXCLUDES(mu);
  Status Run(const std::function<void(uint32_t)>& on_layer) MCDMA_EXCLUDES(mu);
  Status Finish(uint32_t layer, const std::function<void(uint32_t)>& on_layer) MCDMA_EXCLUDES(mu);
  void Release();
};

}  // namespace internal

using internal::ImportImpl;
using internal::Inbox;

Result<Struct> ImportImpl::OpenCall(milliseconds open_wait) {
  Struct open;
  auto& f = *open.mutable_fields();
  f["op"] = wire::Str("open");
  f["host"] = wire::Str(host);
  f["notify"] = wire::Str(notify);
  auto retry_until = Clock::now() + open_wait;
  while (true) {
    auto reply = Call(open);
    if (reply.ok()) {
      if (Status st = EndedError(*reply); !st.ok()) return st;
      return reply;
    }
    const Status& e = reply.status();
    if (e.code() == Code::kNotFound) {
      if (Clock::now() >= retry_until) {
        return Named(Code::kPeerGone, Reason::kHandoffProducerGone,
                     "no producer serves it (" + e.message() + ")");
      }
      std::this_thread::sleep_for(milliseconds(100));
      continue;
    }
    return Failure(e, "open");
  }
}

Status ImportImpl::Prepare(const ImportOptions& options, const wire::Manifest& manifest) {
  sizes = manifest.layer_nbytes;
  remotes.resize(sizes.size());
  if (!options.buffers.empty()) {
    bool fit = options.buffers.size() == sizes.size();
    for (size_t i = 0; fit && i < sizes.size(); ++i) {
      fit = options.buffers[i].valid() && options.buffers[i].size() >= sizes[i];
    }
    if (!fit) {
      return Named(Code::kInvalid, Reason::kHandoffManifest,
                   "the given buffers do not fit " + std::to_string(sizes.size()) + " layers");
    }
    buffers = options.buffers;
    return Status::Ok();
  }
  for (uint64_t n : sizes) {
    auto b = options.pool != nullptr ? options.pool->Take(n) : client->Alloc(n);
    if (!b.ok()) return b.status();
    buffers.push_back(*b);
  }
  return Status::Ok();
}

Result<std::optional<uint32_t>> ImportImpl::NextEvent(bool block) {
  if (!pending.empty()) {
    uint32_t layer = pending.front();
    pending.pop_front();
    return std::optional<uint32_t>(layer);
  }
  while (true) {
    std::string data;
    {
      MutexLock lock(inbox->mu);
      if (inbox->events.empty() && block) {
        auto left = Left();
        if (!left.ok()) return left.status();
        inbox->cv.wait_for(lock.native(), std::min(*left, kProbe), [&]() MCDMA_REQUIRES(inbox->mu) {
          return !inbox->events.empty() || inbox->closed;
        });
      }
      if (inbox->closed) {
        return Status(Code::kCancelled, "hand-off " + id + ": the import was closed");
      }
      if (inbox->overflow) {
        return Status(Code::kInvalid, "hand-off " + id + ": the producer sent more than " +
                                          std::to_string(kMaxQueued) + " events");
      }
      if (!inbox->events.empty()) {
        data = std::move(inbox->events.front());
        inbox->events.pop_front();
      } else if (!block) {
        return std::optional<uint32_t>();
      }
    }
    if (data.empty()) {  // a probe interval passed without an event
      if (Status st = Probe(); !st.ok()) return st;
      continue;
    }
    auto event = wire::ParseObject(data, "hand-off event");
    if (!event.ok()) return event.status();
    auto kind = wire::String(wire::Field(*event, "event")).value_or("");
    if (kind != "layer") {
      Struct ended;
      (*ended.mutable_fields())["state"] = wire::Str(kind);
      (*ended.mutable_fields())["reason"] = wire::Field(*event, "reason");
      if (Status st = EndedError(ended); !st.ok()) return st;
      continue;
    }
    google::protobuf::Value v;
    *v.mutable_struct_value() = *event;
    auto ev = wire::CheckLayerEvent(v, static_cast<uint32_t>(sizes.size()));
    if (!ev.ok()) return ev.status();
    if (checksums[ev->layer].has_value()) continue;  // a duplicate: already known
    checksums[ev->layer] = ev->checksum;
    {
      MutexLock lock(mu);
      stats.layers[ev->layer].published_at = Since(started);
    }
    return std::optional<uint32_t>(ev->layer);
  }
}

Status ImportImpl::Finish(uint32_t layer, const std::function<void(uint32_t)>& on_layer) {
  const std::optional<uint64_t> want = checksums[layer].value_or(std::nullopt);
  double verify_s = 0;
  if (verify && want.has_value()) {
    auto t0 = Clock::now();
    uint64_t got = Checksum({buffers[layer].data(), sizes[layer]});
    verify_s = Since(t0);
    if (got != *want) {
      return Named(Code::kInternal, Reason::kHandoffChecksum,
                   "layer " + std::to_string(layer) + " checksum " + wire::ChecksumHex(got) +
                       ", the producer published " + wire::ChecksumHex(*want));
    }
  }
  {
    MutexLock lock(mu);
    stats.layers[layer].verify_s = verify_s;
    stats.layers[layer].landed_at = Since(started);
    landed[layer] = true;
    ++landed_count;
    if (landed_count == sizes.size()) {  // the last: the totals are final with it
      stats.total_s = stats.layers[layer].landed_at;
      stats.bytes = 0;
      for (uint64_t s : sizes) stats.bytes += s;
    }
  }
  landed_cv.notify_all();
  if (on_layer) on_layer(layer);
  return Status::Ok();
}

// Up to kWindow layer reads are in flight at once, so that the link moves
// the next layer while a completion travels back to this thread and the
// read after it is asked for; a landed layer is checked while the others
// move.
Status ImportImpl::Run(const std::function<void(uint32_t)>& on_layer) {
  struct Moving {
    uint32_t layer;
    Clock::time_point t0;
    Future<uint64_t> future;
  };
  std::deque<Moving> moving;
  auto drain = [&moving](Status st) {  // the buffers are the daemon's until each read ends
    for (auto& m : moving) (void)m.future.Wait();
    moving.clear();
    return st;
  };
  // Asks for every published layer the window has room for; blocks for the
  // next event only when nothing moves.
  auto fill = [&](bool may_block) -> Status {
    while (moving.size() < kWindow) {
      auto next = NextEvent(may_block && moving.empty());
      if (!next.ok()) return next.status();
      if (!next->has_value()) return Status::Ok();
      uint32_t layer = **next;
      auto remote = Remote(layer);
      if (!remote.ok()) return remote.status();
      auto left = Left();
      if (!left.ok()) return left.status();
      moving.push_back({layer, Clock::now(),
                        client->ReadAsync(*remote, 0, buffers[layer], 0, sizes[layer], *left)});
    }
    return Status::Ok();
  };
  const size_t n = sizes.size();
  for (size_t finished = 0; finished < n; ++finished) {
    if (Status st = fill(true); !st.ok()) return drain(st);
    Moving done = std::move(moving.front());
    moving.pop_front();
    auto moved = done.future.Wait();
    if (!moved.ok()) {
      Status st = Failure(moved.status(), "reading layer " + std::to_string(done.layer));
      Code c = moved.status().code();
      if (c == Code::kRevoked || c == Code::kNotFound || c == Code::kPeerGone) {
        // The producer ended it or is gone: say which.
        if (Status probed = Probe(); !probed.ok()) st = probed;
      }
      return drain(st);
    }
    {
      MutexLock lock(mu);
      stats.layers[done.layer].pull_s = Since(done.t0);
    }
    // The next reads go out before this layer is checked.
    if (Status st = fill(false); !st.ok()) return drain(st);
    if (Status st = Finish(done.layer, on_layer); !st.ok()) return drain(st);
  }
  Struct done;
  (*done.mutable_fields())["op"] = wire::Str("done");
  (*done.mutable_fields())["host"] = wire::Str(host);
  (void)Call(done);  // every byte is here; the producer only misses the courtesy
  return Status::Ok();
}

void ImportImpl::Release() {
  if (notify_id != 0) {
    (void)client->Unserve(notify_id);
    notify_id = 0;
  }
  for (const auto& r : remotes) {
    if (r) (void)client->Release(*r);
  }
  remotes.clear();
}

Result<std::unique_ptr<Import>> Import::Open(Client& client, std::string_view peer,
                                             std::string_view handoff_id,
                                             const ImportOptions& options) {
  if (Status st = CheckId(handoff_id); !st.ok()) return st;
  auto impl = std::make_unique<ImportImpl>();
  ImportImpl& m = *impl;
  m.started = Clock::now();
  m.deadline = m.started + options.deadline;
  m.client = &client;
  m.id = std::string(handoff_id);
  m.verify = options.verify;
  m.host = client.info().host_id;
  bool local = peer.empty() || peer == m.host;
  m.peer = local ? "" : std::string(peer);
  m.service = local ? wire::ServiceName(m.id) : m.peer + "/" + wire::ServiceName(m.id);

  std::optional<Struct> expect;
  if (!options.expect_json.empty()) {
    auto parsed = wire::ParseObject(options.expect_json, "KVImport expect");
    if (!parsed.ok()) return parsed.status();
    expect = std::move(*parsed);
  }
  std::unique_ptr<Import> out(new Import(std::move(impl)));
  m.notify = wire::ServiceName(m.id) + ".in." + RandomHex12();
  std::weak_ptr<Inbox> weak = m.inbox;
  auto served = client.Serve(m.notify, [weak](ServerCall& call) {
    auto inbox = weak.lock();
    if (!inbox) return;
    {
      MutexLock lock(inbox->mu);
      if (inbox->events.size() >= kMaxQueued) {
        inbox->overflow = true;
      } else {
        // An empty string means "no event" to the puller: never queue one.
        std::string data(call.view());
        inbox->events.push_back(data.empty() ? std::string(" ") : std::move(data));
      }
    }
    inbox->cv.notify_one();
    if (!call.one_way()) (void)call.Reply(std::string_view());
  });
  if (!served.ok()) return served.status();
  m.notify_id = *served;

  auto reply = m.OpenCall(options.open_wait);
  if (!reply.ok()) return reply.status();
  auto manifest = wire::CheckManifest(wire::Field(*reply, "manifest"));
  if (!manifest.ok()) return manifest.status();
  if (expect) {
    auto problems = wire::Mismatches(manifest->object, *expect);
    if (!problems.empty()) {
      std::string text;
      for (const auto& p : problems) text += (text.empty() ? "" : "; ") + p;
      return m.Named(Code::kInvalid, Reason::kHandoffManifest, text);
    }
  }
  if (!options.token_digest.empty()) {
    auto have = wire::String(wire::Field(manifest->object, "token_digest"));
    if (have != std::optional<std::string>(options.token_digest)) {
      return m.Named(Code::kInvalid, Reason::kHandoffDigest,
                     "token digest '" + have.value_or("None").substr(0, 128) +
                         "' is not this prompt's '" + options.token_digest + "'");
    }
  }
  auto n = static_cast<uint32_t>(manifest->layer_nbytes.size());
  auto published = wire::CheckPublished(*reply, n);
  if (!published.ok()) return published.status();
  if (Status st = m.Prepare(options, *manifest); !st.ok()) return st;
  m.manifest_json = wire::ToJson(manifest->object);
  m.TrackLayers(n, *published);
  return out;
}

void ImportImpl::TrackLayers(uint32_t n, const std::vector<wire::LayerEvent>& published) {
  checksums.assign(n, std::nullopt);
  landed.assign(n, false);
  stats.layers.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    stats.layers[i].index = i;
    stats.layers[i].nbytes = sizes[i];
  }
  for (const auto& ev : published) {
    if (checksums[ev.layer].has_value()) continue;
    checksums[ev.layer] = ev.checksum;
    pending.push_back(ev.layer);
  }
  stats.open_s = Since(started);
  for (uint32_t layer : pending) stats.layers[layer].published_at = stats.open_s;
}

Import::Import(std::unique_ptr<ImportImpl> impl) : impl_(std::move(impl)) {}

Import::~Import() { Close(); }

const std::string& Import::handoff_id() const { return impl_->id; }
const std::string& Import::manifest_json() const { return impl_->manifest_json; }
const std::vector<uint64_t>& Import::layer_nbytes() const { return impl_->sizes; }
const std::vector<Buffer>& Import::buffers() const { return impl_->buffers; }

Status Import::Pull(const std::function<void(uint32_t)>& on_layer) {
  {
    MutexLock lock(impl_->mu);
    if (impl_->pulled) return Status(Code::kInvalid, "hand-off " + impl_->id + ": pulled already");
    if (impl_->closed) return Status(Code::kCancelled, "hand-off " + impl_->id + ": closed");
    impl_->pulled = true;
    impl_->pulling = true;
  }
  Status st = impl_->Run(on_layer);
  {
    MutexLock lock(impl_->mu);
    if (!st.ok()) impl_->error = st;
    impl_->pulling = false;
  }
  impl_->landed_cv.notify_all();
  return st;
}

Result<LayerStats> Import::WaitLayer(uint32_t layer, milliseconds timeout) {
  ImportImpl& m = *impl_;
  if (layer >= m.sizes.size()) {
    return Status(Code::kOutOfRange, "wait_layer(" + std::to_string(layer) + "): there are " +
                                         std::to_string(m.sizes.size()) + " layers");
  }
  auto until = Clock::now() + timeout;
  MutexLock lock(m.mu);
  while (!m.landed[layer]) {
    if (m.error) return *m.error;
    if (m.landed_cv.wait_until(lock.native(), until) == std::cv_status::timeout &&
        !m.landed[layer]) {
      if (m.error) return *m.error;
      return Status(Code::kTimeout, "hand-off " + m.id + ": layer " + std::to_string(layer) +
                                        " not landed in " + std::to_string(timeout.count()) +
                                        " ms");
    }
  }
  return m.stats.layers[layer];
}

ImportStats Import::stats() const {
  MutexLock lock(impl_->mu);
  return impl_->stats;
}

void Import::Close() {
  ImportImpl& m = *impl_;
  {
    MutexLock lock(m.inbox->mu);
    m.inbox->closed = true;
  }
  m.inbox->cv.notify_all();
  {
    // A pull in progress ends at its next event wait (at once) or when its
    // read in flight completes; its handles stay valid until then.
    MutexLock lock(m.mu);
    m.landed_cv.wait(lock.native(), [&]() MCDMA_REQUIRES(m.mu) { return !m.pulling; });
    if (m.closed) return;
    m.closed = true;
    if (!m.error)
      m.error = Status(Code::kCancelled, "hand-off " + m.id + ": the import was closed");
  }
  m.landed_cv.notify_all();
  m.Release();
}

}  // namespace mcdma::kv
