// The data path of links: installing and dropping connections, posting
// message fragments from send slots, reassembling what arrives in receive
// slots, and dispatching calls, replies, revocations and echoes. Engine
// thread only.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "engine/engine.hpp"
#include "engine/route_wire.hpp"
#include "mcdma_internal/shm_segment.hpp"
#include "mcdma_internal/wait.hpp"

namespace mcdma::daemon {
namespace {
constexpr size_t kLinkPollBatch = 32;
// Unsent bytes a link may queue while its peer grants no receive credit;
// beyond it the peer is treated as gone (it is not taking data).
constexpr uint64_t kMaxBacklogBytes = 256ULL << 20;
// The largest echo (mcdmactl link test) a peer may send.
constexpr uint32_t kMaxEchoBytes = 64U << 20;
// Messages sent and not acknowledged: no new one starts beyond these (the
// copies kept to send again after a rail failure are bounded by them).
constexpr size_t kMaxUnacked = 1024;
constexpr uint64_t kMaxUnackedBytes = 64ULL << 20;
// The receiver acknowledges on every message it sends, and by itself
// (kAck) after this many messages or bytes without one.
constexpr uint64_t kAckEvery = 32;
constexpr uint64_t kAckEveryBytes = 4ULL << 20;
// Messages that arrived ahead of their turn (a rail switch) held at most.
constexpr size_t kMaxEarly = kMaxUnacked;
constexpr uint64_t kMaxEarlyBytes = 256ULL << 20;

}  // namespace

Result<std::unique_ptr<driver::Endpoint>> Engine::CreateLinkEndpoint(Transport transport) {
  if (device(Transport::kTcp) == nullptr)
    return Status(Code::kUnavailable, "peering is off (no fabric key)");
  if (transport == Transport::kVerbs) {
    if (device(Transport::kVerbs) == nullptr)
      return Status(Code::kUnavailable, "no verbs transport here: " + verbs_info_.reason);
    return device(Transport::kVerbs)->CreateEndpoint();
  }
  return device(Transport::kTcp)->CreateEndpoint();
}

Result<uint64_t> Engine::InstallLink(const LinkSpec& spec,
                                     std::unique_ptr<driver::Connection> conn) {
  if (EngineLink* old = links_.Find(LinkKey{spec.peer, spec.origin})) {
    if (old->spec.generation > spec.generation && old->spec.peer_instance == spec.peer_instance) {
      return Status(Code::kLinkDown, "generation " + std::to_string(spec.generation) +
                                         " is older than the installed " +
                                         std::to_string(old->spec.generation));
    }
    DropLink(old->id, Code::kLinkDown, "replaced by generation " + std::to_string(spec.generation));
  }
  auto l = std::make_unique<EngineLink>();
  l->id = next_id_++;
  l->spec = spec;
  auto r = std::make_unique<Rail>();
  r->spec.index = 0;
  r->spec.transport = spec.transport;
  r->spec.slot = SlotOf(spec.transport);
  r->spec.peer_device = spec.peer_device;
  if (spec.transport == Transport::kVerbs) {
    r->spec.device = verbs_info_.device;
    r->spec.port = verbs_info_.port;
  }
  r->conn = std::move(conn);
  r->device = device(spec.transport);
  if (r->device == nullptr)
    return Status(Code::kInvalid,
                  "no device for a " + std::string(TransportName(spec.transport)) + " link");
  r->spec.profile = r->conn->caps().profile;
  MCDMA_RETURN_IF_ERROR(SetUpRail(*r, spec.peer_slot_bytes));
  l->rails.push_back(std::move(r));
  uint64_t id = l->id;
  spdlog::get("engine")->info("link {} to '{}' ({}) up: generation {}, transport {}", id, spec.peer,
                              OriginName(spec.origin), spec.generation,
                              TransportName(spec.transport));
  links_.Add(std::move(l));
  return id;
}

EngineLink* Engine::FindLink(uint64_t id) { return links_.Find(id); }

EngineLink* Engine::LinkTo(const std::string& peer) { return links_.To(peer); }

std::string LinkFailureText(Code code, const std::string& detail) {
  std::string what = detail.empty() ? std::string("transport error") : detail;
  // The link's operations end LINK_DOWN and say so once: a LINK_DOWN from
  // the transport needs no second prefix, another code is named in words.
  if (code == Code::kLinkDown) return what;
  return "the transport failed with " + std::string(CodeName(code)) + ": " + what;
}

void Engine::FailLink(EngineLink& l, Code code, const std::string& why) {
  if (l.failed) return;
  l.failed = true;
  l.fail_code = code;
  l.fail_reason = why;
}

void Engine::DropLink(uint64_t link_id, Code code, const std::string& why) {
  std::unique_ptr<EngineLink> l = links_.Remove(link_id);
  if (!l) return;
  spdlog::get("engine")->warn("link {} to '{}' ({}, generation {}) down ({}): {}", link_id,
                              l->spec.peer, OriginName(l->spec.origin), l->spec.generation,
                              CodeName(code), why);
  // Its queue pair is gone: no late access can come from it.
  registry_.LinkGone(link_id);
  std::string msg = "link to '" + l->spec.peer + "' went down: " + why;
  for (uint64_t cid : calls_.OnLink(link_id)) {
    std::optional<PendingCall> call = calls_.Take(cid);
    // A peer's call: nobody left to answer.
    if (call && std::holds_alternative<SessionCaller>(call->caller))
      (void)AnswerCaller(*call, code, AsBytes(msg));
  }
  transfers_.LinkGone(link_id, code, msg);
  for (auto& echo : links_.TakeEchoesOn(link_id)) echo.done(Status(code, msg), {});
  CancelRoutedLookup(link_id);
  l.reset();  // closes the connection
  if (on_link_down_) on_link_down_(link_id, why);
}

void Engine::DropPeer(const std::string& peer, Code code, const std::string& why) {
  for (uint64_t id : links_.IdsTo(peer)) DropLink(id, code, why);
}

std::vector<LinkSnapshot> Engine::Links() const {
  std::vector<LinkSnapshot> out = links_.Snapshots([this](uint64_t id) {
    uint32_t n = calls_.CountOnLink(id);
    return n + transfers_.CountOnLink(id);
  });
  for (LinkSnapshot& snap : out) {
    const EngineLink* l = snap.id == 0 ? nullptr : links_.Find(snap.id);
    if (l == nullptr) continue;
    snap.rails = RailSnapshots(*l);
    snap.duplicates = l->duplicates;
    snap.resent = l->resent;
  }
  return out;
}

// ---- Sending -------------------------------------------------------------

bool Engine::PostFragments(EngineLink& l, Rail& r, EngineLink::Outgoing& m) {
  const uint32_t total = m.header.total_len;
  while (!m.started || m.sent < total) {
    if (r.free_send.empty()) return false;
    uint32_t slot = r.free_send.back();
    uint32_t n = std::min(r.payload_per_fragment(), total - m.sent);
    if (r.transfers == 0 && r.sends_in_flight() == 0) r.last_progress = Clock::now();
    link_wire::Header h = m.header;
    h.frag_off = m.sent;
    h.ack = l.delivered;
    link_wire::Encode(h, r.slot(slot));
    if (n > 0) std::memcpy(r.slot(slot) + link_wire::kHeaderBytes, m.payload.data() + m.sent, n);
    Status st = r.conn->PostSend(
        kRailSendTag | slot,
        {r.region.get(), uint64_t{slot} * r.slot_bytes, link_wire::kHeaderBytes + n});
    if (st.code() == Code::kBusy) return false;
    if (!st.ok()) {
      r.Fail(st.code(), "posting a send: " + st.message());
      return false;
    }
    r.free_send.pop_back();
    if (PollsRail(r)) link_active_at_ = Clock::now();
    l.ack_sent = std::max(l.ack_sent, l.delivered);
    l.bytes_since_ack = 0;
    m.started = true;
    m.sent += n;
    ++l.stats->messages_sent;
    l.stats->bytes_sent += link_wire::kHeaderBytes + n;
    r.stats.bytes_sent += link_wire::kHeaderBytes + n;
  }
  return true;
}

void Engine::SendMessage(EngineLink& l, link_wire::Header h, std::span<const std::byte> payload) {
  if (l.failed) return;
  h.total_len = static_cast<uint32_t>(payload.size());
  h.seq = h.type == link_wire::MsgType::kAck ? 0 : l.next_seq++;
  // Kept until acknowledged (or, for an ack, until posted): the app may
  // reuse its arena range once we return, and a rail may fail.
  if (l.backlog_bytes + payload.size() > kMaxBacklogBytes) {
    FailLink(l, Code::kLinkDown,
             "the peer takes no data: more than " + std::to_string(kMaxBacklogBytes >> 20) +
                 " MiB wait to be sent");
    return;
  }
  EngineLink::Outgoing m;
  m.header = h;
  m.payload.assign(reinterpret_cast<const char*>(payload.data()), payload.size());
  l.backlog_bytes += payload.size();
  l.backlog.push_back(std::move(m));
  PumpBacklog(l);
}

bool Engine::PumpBacklog(EngineLink& l) {
  if (l.routed) return PumpRouted(l);
  bool did = false;
  while (!l.backlog.empty() && !l.failed) {
    EngineLink::Outgoing& m = l.backlog.front();
    const bool sequenced = m.header.seq != 0;
    if (!m.started) {
      // A message sent again that the peer has acknowledged meanwhile.
      if (sequenced && m.header.seq <= l.acked) {
        l.backlog_bytes -= m.payload.size();
        l.backlog.pop_front();
        continue;
      }
      // A new message waits for room among the unacknowledged ones.
      if (sequenced && !l.unacked.empty() &&
          (l.unacked.size() >= kMaxUnacked ||
           l.unacked_bytes + m.payload.size() > kMaxUnackedBytes))
        break;
    }
    Rail* r = MessageRail(l);
    if (r == nullptr) break;
    uint32_t before = m.sent;
    bool done = PostFragments(l, *r, m);
    did |= m.sent != before || done;
    if (!done) break;
    l.backlog_bytes -= m.payload.size();
    if (m.trace_call != 0) {
      NoteTracePosted(m.trace_call);
      m.trace_call = 0;
    }
    if (sequenced) {
      l.unacked_bytes += m.payload.size();
      m.sent = 0;
      m.started = false;
      const uint64_t seq = m.header.seq;
      l.unacked.emplace(seq, std::move(m));
    }
    l.backlog.pop_front();
  }
  return did;
}

void Engine::SendReply(uint64_t link_id, uint64_t id, Code code, std::span<const std::byte> payload,
                       Reason reason, std::optional<std::pair<uint64_t, uint64_t>> timed) {
  EngineLink* l = FindLink(link_id);
  if (l == nullptr) return;
  link_wire::Header h;
  h.type = link_wire::MsgType::kReply;
  h.id = id;
  h.status = static_cast<uint16_t>(code);
  h.reason = static_cast<uint32_t>(reason);
  if (timed) {
    h.reason |= link_wire::kTraceBit;
    h.timeout_us = static_cast<uint32_t>(std::min<uint64_t>(timed->first, UINT32_MAX));
    h.target = timed->second;
  }
  SendMessage(*l, h, payload);
}

// ---- Receiving -----------------------------------------------------------

bool Engine::ProgressLinks() {
  // Cleared before polling: a notification after this point is seen by
  // HasWork before the engine sleeps.
  link_pending_.store(false);
  if (links_.empty()) return false;
  bool did = false;
  const auto now = Clock::now();
  for (auto& [id, lp] : links_) {
    EngineLink& l = *lp;
    if (l.routed) {
      if (!l.failed) ProgressRouted(l, now);
      did |= PumpBacklog(l);
      continue;
    }
    for (auto& r : l.rails) {
      if (l.failed) break;
      if (r != nullptr && r->live()) did |= ProgressRail(l, *r);
    }
    if (!l.failed) ProgressProbes(l, Clock::now());
    if (!l.failed && l.delivered > l.ack_sent &&
        (l.delivered - l.ack_sent >= kAckEvery || l.bytes_since_ack >= kAckEveryBytes)) {
      link_wire::Header h;
      h.type = link_wire::MsgType::kAck;
      SendMessage(l, h, {});
    }
    DropFailedRails(l);
    did |= PumpBacklog(l);
  }
  std::vector<std::pair<uint64_t, std::pair<Code, std::string>>> dead;
  for (auto& [id, l] : links_) {
    if (l->failed) dead.push_back({id, {l->fail_code, l->fail_reason}});
  }
  for (auto& [id, why] : dead) DropLink(id, why.first, why.second);
  return did || !dead.empty();
}

bool Engine::ProgressRail(EngineLink& l, Rail& r) {
  driver::WorkCompletion wcs[kLinkPollBatch];
  size_t n = r.conn->Poll(wcs);
  if (n == 0) return false;
  r.last_progress = Clock::now();
  const bool polls = PollsRail(r);
  for (size_t i = 0; i < n && !l.failed && !r.failed; ++i) {
    const driver::WorkCompletion& wc = wcs[i];
    if (wc.op == driver::WorkOp::kRead || wc.op == driver::WorkOp::kWrite) {
      // Bulk completes at its own pace: waiting for it by interrupt costs
      // nothing that matters, and polling through it would take the CPU
      // from a transport whose work the kernel does (Soft-RoCE, tcp).
      OnTransferCompletion(wc, &l, &r);
      continue;
    }
    if (polls) {
      if (wc.op == driver::WorkOp::kRecv) {
        NoteMessageIn(r.last_progress);
      } else {
        link_active_at_ = r.last_progress;
      }
    }
    if (wc.code != Code::kOk) {
      // Whatever the transport saw, the rail is unusable; the link lives on
      // while another rail is up.
      r.Fail(Code::kLinkDown, LinkFailureText(wc.code, wc.detail));
    } else if (wc.op == driver::WorkOp::kSend) {
      r.free_send.push_back(static_cast<uint32_t>(wc.wr_id & kRailSlotMask));
    } else {
      auto slot = static_cast<uint32_t>(wc.wr_id & kRailSlotMask);
      OnFragment(l, r, slot, wc.byte_len);
      if (l.failed || r.failed) break;
      Status st =
          r.conn->PostRecv(wc.wr_id, {r.region.get(), uint64_t{slot} * r.slot_bytes, r.slot_bytes});
      if (!st.ok()) r.Fail(st.code(), "re-posting a receive: " + st.message());
    }
  }
  return true;
}

void Engine::OnFragment(EngineLink& l, Rail& r, uint32_t slot, uint32_t len) {
  ++l.stats->messages_received;
  l.stats->bytes_received += len;
  r.stats.bytes_received += len;
  // Nothing legitimate is larger than an app's arena half (a call or a
  // reply) or an echo.
  uint64_t limit =
      std::max<uint64_t>(options_.max_arena_bytes / 2, kMaxEchoBytes) + route_wire::kOverhead;
  auto message = r.incoming.Feed({r.slot(slot), len}, limit);
  if (!message.ok()) {
    FailLink(l, message.status().code(), message.status().message());
    return;
  }
  const auto& complete = *message;
  if (!complete) return;
  if (OnRailProbe(l, r, complete->header)) return;
  Deliver(l, complete->header, complete->payload);
}

void Engine::ProcessAck(EngineLink& l, uint64_t ack) {
  if (ack >= l.next_seq) {
    FailLink(l, Code::kLinkDown,
             "protocol error: the peer acknowledged message " + std::to_string(ack) +
                 ", but only " + std::to_string(l.next_seq - 1) + " were sent");
    return;
  }
  if (l.routed && ack > l.acked) NoteRoutedAck(l, ack, Clock::now());
  l.acked = std::max(l.acked, ack);
  while (!l.unacked.empty() && l.unacked.begin()->first <= ack) {
    l.unacked_bytes -= l.unacked.begin()->second.payload.size();
    l.unacked.erase(l.unacked.begin());
  }
}

void Engine::Deliver(EngineLink& l, const link_wire::Header& h,
                     std::span<const std::byte> payload) {
  ProcessAck(l, h.ack);
  if (l.failed || h.type == link_wire::MsgType::kAck) return;
  if (h.seq <= l.delivered) {
    // Sent again after the rail that first carried it failed: delivered once.
    ++l.duplicates;
    return;
  }
  if (h.seq > l.delivered + 1) {
    if (l.early.size() >= kMaxEarly || l.early_bytes + payload.size() > kMaxEarlyBytes) {
      FailLink(l, Code::kLinkDown,
               "protocol error: more than " + std::to_string(kMaxEarly) + " messages or " +
                   std::to_string(kMaxEarlyBytes >> 20) + " MiB arrived ahead of message " +
                   std::to_string(l.delivered + 1));
      return;
    }
    if (l.early.emplace(h.seq, std::make_pair(h, std::string(AsText(payload)))).second)
      l.early_bytes += payload.size();
    return;
  }
  Dispatch(l, h, payload);
  ++l.delivered;
  l.bytes_since_ack += payload.size();
  while (!l.failed) {
    auto it = l.early.find(l.delivered + 1);
    if (it == l.early.end()) break;
    auto node = l.early.extract(it);
    l.early_bytes -= node.mapped().second.size();
    Dispatch(l, node.mapped().first, AsBytes(node.mapped().second));
    ++l.delivered;
    l.bytes_since_ack += node.mapped().second.size();
  }
}

void Engine::Dispatch(EngineLink& l, const link_wire::Header& h,
                      std::span<const std::byte> payload) {
  switch (h.type) {
    case link_wire::MsgType::kCall:
    case link_wire::MsgType::kNotify:
      OnIncomingCall(l, h, payload);
      break;
    case link_wire::MsgType::kReply:
      OnReply(l, h, payload);
      break;
    case link_wire::MsgType::kRevoke:
      for (auto& [sid, s] : sessions_) {
        for (auto& [hid, handle] : s->handles) {
          if (handle.peer && handle.peer->peer == l.spec.peer &&
              handle.peer->export_id == h.target && !handle.peer->revoked) {
            handle.peer->revoked = true;
            handle.peer->revoked_why = "export '" + handle.peer->name + "' on '" + l.spec.peer +
                                       "' was unexported, expired or its owner exited";
          }
        }
      }
      // The owner keeps its memory registered until we say none of our
      // RDMA accesses to it is still posted (a link with RDMA rails; the
      // ack is harmless where it waits for none).
      transfers_.OweRevokeAck(l.id, h.target);
      SendRevokeAcks();
      break;
    case link_wire::MsgType::kRevokeAck:
      registry_.AckDrain(h.target, l.id);
      break;
    case link_wire::MsgType::kEcho: {
      link_wire::Header r;
      r.type = link_wire::MsgType::kEchoReply;
      r.id = h.id;
      SendMessage(l, r, payload);
      break;
    }
    case link_wire::MsgType::kEchoReply: {
      if (auto echo = links_.TakeEcho(h.id))
        echo->done(std::string(AsText(payload)), Clock::now() - echo->sent);
      break;
    }
    case link_wire::MsgType::kRouted:
      if (l.routed) {
        FailLink(l, Code::kLinkDown, "protocol error: a routed message inside a routed one");
        break;
      }
      OnRouted(l, payload);
      break;
    case link_wire::MsgType::kLookup:
      OnLookup(l, h, payload);
      break;
    case link_wire::MsgType::kLookupReply:
      OnLookupReply(l, h, payload);
      break;
    case link_wire::MsgType::kResolve:
      OnResolve(l, h, payload);
      break;
    case link_wire::MsgType::kResolveReply:
      OnResolveReply(l, h, payload);
      break;
    case link_wire::MsgType::kPiece:
      OnPiece(l, h, payload);
      break;
    case link_wire::MsgType::kPieceReply:
      OnPieceReply(l, h, payload);
      break;
    case link_wire::MsgType::kAck:
    case link_wire::MsgType::kRailProbe:  // taken on their rail (OnFragment)
    case link_wire::MsgType::kRailProbeAck:
      break;
  }
}

// ---- Echo (mcdmactl link test) ---------------------------------------------

Result<uint64_t> Engine::StartEcho(
    const std::string& peer, std::string payload,
    std::function<void(Result<std::string>, std::chrono::nanoseconds)> done, LinkSnapshot* used) {
  EngineLink* l = LinkTo(peer);
  if (l == nullptr) return Status(Code::kLinkDown, "no link to '" + peer + "' is up");
  if (payload.size() > link_wire::kMaxMessageBytes)
    return Status(Code::kInvalid, "echo payload too large");
  uint64_t seq = next_id_++;
  link_wire::Header h;
  h.type = link_wire::MsgType::kEcho;
  h.id = seq;
  const Clock::time_point sent = Clock::now();
  SendMessage(*l, h, AsBytes(payload));
  links_.AddEcho(seq, LinkTable::EchoWaiter{l->id, std::move(payload), std::move(done), sent});
  if (used != nullptr) {
    used->transport = l->spec.transport;
    used->generation = l->spec.generation;
  }
  return seq;
}

void Engine::CancelEcho(uint64_t seq) { (void)links_.TakeEcho(seq); }

struct Engine::EchoRun {
  uint64_t id = 0;
  std::string peer;
  uint32_t left = 0;
  uint64_t current = 0;  // the echo in flight
  Clock::time_point sent_at{};
  std::mt19937_64 rng{std::random_device{}()};
  std::string payload;
  EchoSeries series;
  std::function<void(Result<EchoSeries>)> done;
  // Sends the next echo. Holds the run weakly: the run is owned by
  // echo_runs_ and by the callback of the echo in flight, nothing else.
  std::function<Status()> next;
};

Result<uint64_t> Engine::StartEchoes(const std::string& peer, uint32_t bytes, uint32_t count,
                                     std::function<void(Result<EchoSeries>)> done) {
  if (count == 0) return Status(Code::kInvalid, "an echo series of no round trips");
  auto run = std::make_shared<EchoRun>();
  run->id = next_id_++;
  run->peer = peer;
  run->left = count;
  run->payload.resize(bytes);
  run->done = std::move(done);
  // Each round trip's answer starts the next, on the engine thread.
  run->next = [this, weak = std::weak_ptr<EchoRun>(run)]() -> Status {
    std::shared_ptr<EchoRun> run = weak.lock();
    if (!run) return Status(Code::kInternal, "echo series gone");
    for (char& c : run->payload) c = static_cast<char>(run->rng());
    auto seq = StartEcho(
        run->peer, run->payload,
        [this, run](Result<std::string> r, std::chrono::nanoseconds took) {
          if (echo_runs_.erase(run->id) == 0) return;  // cancelled
          auto finish = [&](Result<EchoSeries> out) {
            auto done = std::move(run->done);
            done(std::move(out));
          };
          if (!r.ok()) return finish(r.status());
          if (*r != run->payload) {
            size_t at = 0;
            while (at < r->size() && at < run->payload.size() && (*r)[at] == run->payload[at]) ++at;
            return finish(Status(Code::kInternal, "echo mismatch from '" + run->peer +
                                                      "' at byte " + std::to_string(at) + " of " +
                                                      std::to_string(run->payload.size())));
          }
          run->series.rtt.push_back(took);
          if (--run->left == 0) return finish(std::move(run->series));
          echo_runs_.emplace(run->id, run);
          if (Status st = run->next(); !st.ok()) {
            echo_runs_.erase(run->id);
            finish(st);
          }
        },
        &run->series.used);
    if (!seq.ok()) return seq.status();
    run->current = *seq;
    run->sent_at = Clock::now();
    return Status::Ok();
  };
  echo_runs_.emplace(run->id, run);
  if (Status st = run->next(); !st.ok()) {
    echo_runs_.erase(run->id);
    return st;
  }
  return run->id;
}

void Engine::ExpireEchoes(Clock::time_point now) {
  const auto limit = std::chrono::milliseconds(options_.link_timeout_ms);
  for (auto it = echo_runs_.begin(); it != echo_runs_.end();) {
    std::shared_ptr<EchoRun> run = it->second;
    if (now - run->sent_at < limit) {
      ++it;
      continue;
    }
    CancelEcho(run->current);
    it = echo_runs_.erase(it);
    auto done = std::move(run->done);
    done(Status(Code::kTimeout, "no echo from '" + run->peer + "' within " +
                                    std::to_string(options_.link_timeout_ms) + " ms"));
  }
}

void Engine::CancelEchoes(uint64_t series) {
  auto it = echo_runs_.find(series);
  if (it == echo_runs_.end()) return;
  CancelEcho(it->second->current);
  echo_runs_.erase(it);
}

}  // namespace mcdma::daemon
