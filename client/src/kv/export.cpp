// kv::Export: the producer side of a KV hand-off (docs/protocol.md §18).
//
// One lock orders publication against consumer registration, so every
// consumer learns of every published layer exactly once: in its open reply,
// or in a notification sent after it registered. Consumers' calls are
// answered on the client's handler thread and never block it: all sending
// (notifications, withdrawals) happens on the producer's own threads.
#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <utility>

#include "kv/wire.hpp"
#include "mcdma/kv.hpp"
#include "mcdma_internal/thread_annotations.hpp"

namespace mcdma::kv {
namespace {

using google::protobuf::Struct;
using Clock = std::chrono::steady_clock;

// A bound on the consumers one hand-off keeps (each is a notification per
// layer): a peer cannot grow the table without limit.
constexpr size_t kMaxConsumers = 256;
constexpr std::chrono::milliseconds kNotifyTimeout{5000};

std::string Seconds(std::chrono::milliseconds ms) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", static_cast<double>(ms.count()) / 1000.0);
  return buf;
}

}  // namespace

namespace internal {

// Fields above `mu` are set by Export::Create before the hand-off is
// served (before any other thread can see it) and only read after.
struct ExportImpl {
  ExportImpl(Client& c, std::string hid, std::vector<Buffer> layers)
      : client(c),
        id(std::move(hid)),
        buffers(std::move(layers)),
        published(buffers.size(), false) {}

  Client& client;
  const std::string id;
  std::vector<Buffer> buffers;
  std::string manifest_json;
  google::protobuf::Value manifest;  // as it goes into open replies
  bool checksum = true;
  std::string host;  // this client's host
  std::optional<Clock::time_point> expires;
  std::chrono::milliseconds ttl{0};

  Mutex mu;
  std::condition_variable changed;
  State state MCDMA_GUARDED_BY(mu) = State::kOpen;
  std::string reason MCDMA_GUARDED_BY(mu);
  google::protobuf::ListValue events MCDMA_GUARDED_BY(mu);
  std::vector<bool> published MCDMA_GUARDED_BY(mu);
  // Each registered consumer: (its notification target, its host).
  std::vector<std::pair<std::string, std::string>> consumers MCDMA_GUARDED_BY(mu);
  std::vector<std::string> done MCDMA_GUARDED_BY(mu);
  bool end_sent MCDMA_GUARDED_BY(mu) = false;
  std::vector<std::string> exports MCDMA_GUARDED_BY(mu);
  uint64_t service_id MCDMA_GUARDED_BY(mu) = 0;

  // Flips an open hand-off whose TTL passed to expired.
  void ExpireIfDue() MCDMA_REQUIRES(mu) {
    if (state == State::kOpen && expires && Clock::now() >= *expires) {
      state = State::kExpired;
      reason = "its TTL of " + Seconds(ttl) + " s passed";
      changed.notify_all();
    }
  }

  Result<std::string> Serve(const Struct& request) MCDMA_EXCLUDES(mu);
  // Tells every consumer not done of the end (once), and withdraws the
  // exports; with `service`, the service too. Producer threads only.
  void SendEnd(bool service) MCDMA_EXCLUDES(mu);
  void NotifyAll(const std::vector<std::string>& targets, const std::string& payload)
      MCDMA_EXCLUDES(mu);
};

}  // namespace internal

using internal::ExportImpl;

Result<std::string> ExportImpl::Serve(const Struct& request) {
  auto op = wire::String(wire::Field(request, "op")).value_or("");
  Struct reply;
  auto& f = *reply.mutable_fields();
  MutexLock lock(mu);
  ExpireIfDue();
  if (op == "status") {
    f["state"] = wire::Str(StateName(state));
    f["reason"] = wire::Str(reason);
    return wire::ToJson(reply);
  }
  if (op == "done") {
    auto who = wire::String(wire::Field(request, "host")).value_or("");
    if (done.size() < kMaxConsumers) done.push_back(who.substr(0, 128));
    changed.notify_all();
    f["state"] = wire::Str(StateName(state));
    return wire::ToJson(reply);
  }
  if (op != "open") {
    return Status(Code::kInvalid, "hand-off " + id + ": unknown op '" + op.substr(0, 64) + "'");
  }
  if (state != State::kOpen) {
    f["state"] = wire::Str(StateName(state));
    f["reason"] = wire::Str(reason);
    return wire::ToJson(reply);
  }
  auto who = wire::String(wire::Field(request, "host"));
  auto notify = wire::String(wire::Field(request, "notify"));
  if (!who || !notify || notify->empty() || notify->size() > 256 || who->size() > 128) {
    return Status(Code::kInvalid, "hand-off open: host and notify must be strings");
  }
  std::string target = *who == host ? *notify : *who + "/" + *notify;
  auto it = std::find_if(consumers.begin(), consumers.end(),
                         [&](const auto& c) { return c.first == target; });
  if (it == consumers.end()) {
    if (consumers.size() >= kMaxConsumers) {
      return Status(Code::kBusy, "hand-off " + id + ": " + std::to_string(kMaxConsumers) +
                                     " consumers registered already");
    }
    consumers.emplace_back(target, *who);
  }
  f["state"] = wire::Str("open");
  f["manifest"] = manifest;
  *f["published"].mutable_list_value() = events;
  return wire::ToJson(reply);
}

void ExportImpl::NotifyAll(const std::vector<std::string>& targets, const std::string& payload) {
  auto bytes = std::span<const std::byte>(reinterpret_cast<const std::byte*>(payload.data()),
                                          payload.size());
  for (const auto& target : targets) {
    Status st = client.Notify(target, bytes, kNotifyTimeout);
    if (!st.ok()) {  // the consumer is gone: stop telling it
      MutexLock lock(mu);
      std::erase_if(consumers, [&](const auto& c) { return c.first == target; });
    }
  }
}

void ExportImpl::SendEnd(bool service) {
  std::vector<std::string> targets;
  std::string payload;
  std::vector<std::string> names;
  uint64_t sid = 0;
  {
    MutexLock lock(mu);
    ExpireIfDue();
    if (state != State::kOpen && !end_sent) {
      end_sent = true;
      for (const auto& [target, who] : consumers) {
        if (std::find(done.begin(), done.end(), who) == done.end()) targets.push_back(target);
      }
      Struct ev;
      (*ev.mutable_fields())["event"] = wire::Str(StateName(state));
      (*ev.mutable_fields())["reason"] = wire::Str(reason);
      payload = wire::ToJson(ev);
    }
    if (state != State::kOpen) names.swap(exports);
    if (service) std::swap(sid, service_id);
  }
  if (!targets.empty()) NotifyAll(targets, payload);
  // An expired or revoked hand-off keeps answering (so a late consumer
  // learns why) until Close; its bytes are withdrawn at once.
  for (const auto& name : names) (void)client.Unexport(name);  // expired already, or closed
  if (sid != 0) (void)client.Unserve(sid);
}

Result<std::unique_ptr<Export>> Export::Create(Client& client, std::string_view handoff_id,
                                               std::vector<Buffer> layers,
                                               std::string_view manifest_json,
                                               const ExportOptions& options) {
  if (Status st = CheckId(handoff_id); !st.ok()) return st;
  if (layers.empty()) return Status(Code::kInvalid, "KVExport: no layers");
  if (layers.size() > kMaxLayers) {
    return Status(Code::kInvalid, "KVExport: more than " + std::to_string(kMaxLayers) + " layers");
  }
  for (const Buffer& b : layers) {
    if (!b.valid()) return Status(Code::kInvalid, "KVExport: a layer is not a buffer");
  }
  auto producer =
      wire::ParseObject(manifest_json.empty() ? "{}" : manifest_json, "KVExport manifest");
  if (!producer.ok()) return producer.status();

  auto impl = std::make_shared<ExportImpl>(client, std::string(handoff_id), std::move(layers));
  impl->checksum = options.checksum;
  impl->host = client.info().host_id;
  Struct m = std::move(*producer);
  auto& f = *m.mutable_fields();
  f["format"] = wire::Str(kFormat);
  f["handoff_id"] = wire::Str(impl->id);
  f["n_layers"] = wire::Num(static_cast<double>(impl->buffers.size()));
  auto& sizes = *f["layer_nbytes"].mutable_list_value();
  for (const Buffer& b : impl->buffers)
    *sizes.add_values() = wire::Num(static_cast<double>(b.size()));
  f["checksum"] = options.checksum ? wire::Str("xxh3-64") : wire::Null();
  impl->manifest_json = wire::ToJson(m);
  *impl->manifest.mutable_struct_value() = std::move(m);
  if (options.ttl.count() > 0) {
    impl->ttl = options.ttl;
    impl->expires = Clock::now() + options.ttl;
  }

  std::unique_ptr<Export> out(new Export(impl));
  mcdma::ExportOptions eo;
  eo.ttl = options.ttl;
  eo.allow_read = true;
  eo.allowed_peers = options.allowed_peers;
  for (uint32_t i = 0; i < impl->buffers.size(); ++i) {
    std::string name = wire::ExportName(impl->id, i);
    if (Status st = client.Export(impl->buffers[i], name, eo); !st.ok())
      return st;  // ~Export withdraws
    MutexLock lock(impl->mu);
    impl->exports.push_back(std::move(name));
  }
  std::weak_ptr<ExportImpl> weak = impl;
  auto served = client.Serve(wire::ServiceName(impl->id), [weak](ServerCall& call) {
    auto self = weak.lock();
    if (!self) {
      (void)call.ReplyError(Status(Code::kNotFound, "the hand-off is closed"));
      return;
    }
    auto request = wire::ParseObject(call.view(), "hand-off request");
    if (!request.ok()) {
      (void)call.ReplyError(request.status());
      return;
    }
    auto reply = self->Serve(*request);
    (void)(reply.ok() ? call.Reply(*reply) : call.ReplyError(reply.status()));
  });
  if (!served.ok()) return served.status();
  MutexLock lock(impl->mu);
  impl->service_id = *served;
  return out;
}

Export::Export(std::shared_ptr<ExportImpl> impl) : impl_(std::move(impl)) {}

Export::~Export() { Close(); }

const std::string& Export::handoff_id() const { return impl_->id; }
const std::vector<Buffer>& Export::buffers() const { return impl_->buffers; }
std::string Export::manifest_json() const { return impl_->manifest_json; }

State Export::state() {
  State s;
  {
    MutexLock lock(impl_->mu);
    impl_->ExpireIfDue();
    s = impl_->state;
  }
  if (s != State::kOpen) impl_->SendEnd(false);
  return s;
}

Status Export::PublishLayer(uint32_t layer) {
  ExportImpl& m = *impl_;
  if (layer >= m.buffers.size()) {
    return Status(Code::kOutOfRange, "publish_layer(" + std::to_string(layer) + "): there are " +
                                         std::to_string(m.buffers.size()) + " layers");
  }
  std::optional<uint64_t> cs;
  if (m.checksum) {
    const Buffer& b = m.buffers[layer];
    cs = Checksum({b.data(), b.size()});
  }
  std::vector<std::string> targets;
  std::string payload = wire::ToJson(wire::LayerEventObject(layer, cs));
  std::optional<Status> ended;
  {
    MutexLock lock(m.mu);
    m.ExpireIfDue();
    if (m.state != State::kOpen) {
      ended = Status(Code::kInvalid,
                     "hand-off " + m.id + " is " + StateName(m.state) + ": cannot publish");
    } else if (m.published[layer]) {
      return Status(Code::kAlreadyExists,
                    "publish_layer(" + std::to_string(layer) + "): already published");
    } else {
      m.published[layer] = true;
      *m.events.add_values()->mutable_struct_value() = wire::LayerEventObject(layer, cs);
      for (const auto& c : m.consumers) targets.push_back(c.first);
    }
  }
  if (ended) {
    m.SendEnd(false);
    return *ended;
  }
  m.NotifyAll(targets, payload);
  return Status::Ok();
}

Status Export::PublishAll() {
  for (uint32_t i = 0; i < impl_->buffers.size(); ++i) {
    bool done;
    {
      MutexLock lock(impl_->mu);
      done = impl_->published[i];
    }
    if (done) continue;
    if (Status st = PublishLayer(i); !st.ok()) return st;
  }
  return Status::Ok();
}

Result<std::vector<std::string>> Export::WaitConsumed(uint32_t count,
                                                      std::chrono::milliseconds timeout) {
  ExportImpl& m = *impl_;
  auto deadline = Clock::now() + timeout;
  MutexLock lock(m.mu);
  while (m.done.size() < count) {
    if (!m.changed.wait_until(lock.native(), deadline,
                              [&]() MCDMA_REQUIRES(m.mu) { return m.done.size() >= count; })) {
      return Status(Code::kTimeout, "hand-off " + m.id + ": " + std::to_string(m.done.size()) +
                                        " of " + std::to_string(count) +
                                        " consumers finished within " + Seconds(timeout) + " s");
    }
  }
  return m.done;
}

Status Export::Revoke(std::string_view reason) {
  {
    MutexLock lock(impl_->mu);
    impl_->ExpireIfDue();
    if (impl_->state == State::kOpen) {
      impl_->state = State::kRevoked;
      impl_->reason = std::string(reason.substr(0, 512));
      impl_->changed.notify_all();
    }
  }
  impl_->SendEnd(false);
  return Status::Ok();
}

void Export::Close() {
  {
    MutexLock lock(impl_->mu);
    impl_->ExpireIfDue();
    if (impl_->state == State::kOpen) {
      impl_->state = State::kClosed;
      impl_->reason = "closed by the producer";
      impl_->changed.notify_all();
    }
  }
  impl_->SendEnd(true);
}

}  // namespace mcdma::kv
