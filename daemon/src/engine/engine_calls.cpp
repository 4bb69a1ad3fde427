// Calls, one algorithm whoever the caller is. A call is offered to a local
// service the same way whether an app here made it (HandleCall) or a peer
// did over a link (OnIncomingCall): OfferToService. A reply or a failure
// goes back to the caller the same way whether an app here answered
// (HandleReply), a peer did (OnReply), or the call failed (FailCall):
// AnswerCaller. An app's call to a peer's service goes out on the link
// (HandlePeerCall). The CallTable (engine/call_table.hpp) books what is pending.
// Engine thread only.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "engine/engine.hpp"

namespace mcdma::daemon {
namespace {
std::string Range(uint64_t off, uint64_t len) {
  return "[" + std::to_string(off) + ", " + std::to_string(off) + "+" + std::to_string(len) + ")";
}
}  // namespace

Result<uint64_t> Engine::OfferToService(const CallCaller& caller, uint64_t service_id,
                                        std::span<const std::byte> payload,
                                        Clock::time_point deadline, uint32_t timeout_us,
                                        bool one_way) {
  const ServiceRecord* svc = registry_.FindService(service_id);
  if (svc == nullptr) {
    return Status(
        Code::kNotFound, Reason::kNoSuchService,
        "no service with id " + std::to_string(service_id) + " (unserved, or its app exited)");
  }
  Session* server = FindSession(svc->session);
  if (server == nullptr || server->closing)
    return Status(Code::kPeerGone, "the app serving '" + svc->name + "' is gone");
  if (payload.size() > server->geometry().daemon_arena_bytes) {
    std::string why = "payload of " + std::to_string(payload.size()) +
                      " bytes is larger than the arena of the app serving '" + svc->name + "'";
    // An app here is told the size it ran into.
    if (std::holds_alternative<SessionCaller>(caller))
      why += " (" + std::to_string(server->geometry().daemon_arena_bytes) + " bytes)";
    return Status(Code::kNoMemory, why);
  }
  const auto* from = std::get_if<SessionCaller>(&caller);
  shm::EventDesc ev{};
  ev.kind = static_cast<uint8_t>(one_way ? shm::EventKind::kIncomingNotify
                                         : shm::EventKind::kIncomingCall);
  ev.service_id = svc->id;
  ev.source = from != nullptr ? from->session : 0;  // 0: another host
  ev.timeout_us = timeout_us;
  uint64_t call_id = 0;
  if (!one_way) {
    call_id = next_id_++;
    ev.call_id = call_id;
  }
  if (!PostTo(*server, /*inbox=*/true, ev, payload)) {
    return Status(Code::kBusy, Reason::kBacklogFull,
                  "the inbox of '" + svc->name + "' is full: its app has " +
                      std::to_string(server->backlog()) + " events (" +
                      std::to_string(server->backlog_bytes()) +
                      " bytes) it has not read (limits.max_backlog, max_backlog_bytes, "
                      "max_backlog_bytes_total)");
  }
  if (!one_way)
    calls_.Add(call_id, PendingCall{caller, SessionServer{server->id(), svc->id}, deadline});
  return call_id;
}

Status Engine::AnswerCaller(const PendingCall& call, Code code, std::span<const std::byte> payload,
                            Reason reason) {
  if (const auto* peer = std::get_if<LinkCaller>(&call.caller)) {
    // A peer's call: the reply goes back over the link it came on.
    if (payload.size() > link_wire::kMaxMessageBytes) {
      std::string why = "reply of " + std::to_string(payload.size()) +
                        " bytes is larger than a link message may be";
      SendReply(peer->link, peer->peer_call, Code::kNoMemory, AsBytes(why));
      return Status(Code::kNoMemory, why);
    }
    std::optional<std::pair<uint64_t, uint64_t>> timed;
    if (call.trace && call.trace->received_ns != 0 && answer_taken_ns_ != 0) {
      const uint64_t now = SteadyNs(Clock::now());
      timed.emplace(now - std::min(now, call.trace->received_ns),
                    answer_taken_ns_ - std::min(answer_taken_ns_, call.trace->delivered_ns));
    }
    SendReply(peer->link, peer->peer_call, code, payload, reason, timed);
    return Status::Ok();
  }
  const auto& from = std::get<SessionCaller>(call.caller);
  if (const auto* to = std::get_if<LinkServer>(&call.server); to != nullptr && code != Code::kOk) {
    if (EngineLink* l = FindLink(to->link)) ++l->stats->ops_failed;
  }
  Session* caller = FindSession(from.session);
  if (caller == nullptr || caller->closing) return Status::Ok();  // nobody to tell
  --caller->inflight;
  auto op = call.one_way() ? shm::Op::kNotify : shm::Op::kCall;
  if (payload.size() > caller->geometry().daemon_arena_bytes) {
    std::string why = "reply of " + std::to_string(payload.size()) +
                      " bytes is larger than the caller's arena (" +
                      std::to_string(caller->geometry().daemon_arena_bytes) + " bytes)";
    Complete(*caller, op, from.tag, Code::kNoMemory, why, 0, {}, Reason::kNone, call.started);
    return Status(Code::kNoMemory, why);
  }
  uint64_t bytes = 0;
  if (code == Code::kOk) {
    const auto* to = std::get_if<LinkServer>(&call.server);
    bytes = call.one_way() ? to->bytes : payload.size();
  }
  // A notify's ack carries no payload for the app; an error's is its message.
  Complete(*caller, op, from.tag, code, AsText(payload), bytes,
           call.one_way() ? std::span<const std::byte>{} : payload, reason, call.started);
  return Status::Ok();
}

void Engine::FailCall(uint64_t call_id, Code code, const std::string& message) {
  if (auto call = calls_.Take(call_id)) (void)AnswerCaller(*call, code, AsBytes(message));
}

// ---- Calls made here -------------------------------------------------------

void Engine::HandleCall(Session& s, const shm::SubmitDesc& d, bool one_way) {
  if (!s.InAppHalf(d.payload_off, d.payload_len)) {
    Reject(s, d, Code::kOutOfRange,
           "payload " + Range(d.payload_off, d.payload_len) +
               " is outside the app half of the arena (" +
               std::to_string(s.geometry().app_arena_bytes) + " bytes)");
    return;
  }
  if (auto ps = peer_services_.find(d.target); ps != peer_services_.end()) {
    HandlePeerCall(s, d, one_way, ps->second);
    return;
  }
  auto deadline = DeadlineFor(d);
  auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now());
  auto timeout_us = static_cast<uint32_t>(std::clamp<int64_t>(left.count(), 1, UINT32_MAX));
  auto offered =
      OfferToService(SessionCaller{s.id(), d.tag}, d.target,
                     s.AppPayload(d.payload_off, d.payload_len), deadline, timeout_us, one_way);
  if (!offered.ok()) {
    Decline(s, d, offered.status());
    return;
  }
  if (!one_way) {
    ++s.inflight;
    return;
  }
  if ((d.flags & shm::kFlagNoCompletion) == 0) {
    Complete(s, shm::Op::kNotify, d.tag, Code::kOk, {}, d.payload_len);
  } else {
    CountDone(shm::Op::kNotify, Code::kOk, d.payload_len);
  }
}

void Engine::HandlePeerCall(Session& s, const shm::SubmitDesc& d, bool one_way,
                            const PeerService& ps) {
  auto route = RouteTo(ps.peer);
  if (!route.ok()) {
    Decline(s, d, route.status());
    return;
  }
  EngineLink* l = route.value();
  if (l->routed && (l->next_hop.empty() || DirectLinkTo(l->next_hop) == nullptr)) {
    Decline(s, d, Code::kLinkDown, "no route to peer '" + ps.peer + "' is up");
    return;
  }
  if (l->spec.peer_instance != ps.peer_instance) {
    // Starts like a local stale id, so the client looks the name up again.
    Decline(s, d,
            Status(Code::kNotFound, Reason::kNoSuchService,
                   "no service with id " + std::to_string(d.target) + ": peer '" + ps.peer +
                       "' restarted since '" + ps.name + "' was looked up"));
    return;
  }
  if (d.payload_len > link_wire::kMaxMessageBytes) {
    Decline(s, d, Code::kNoMemory, "payload is larger than a link message may be");
    return;
  }
  ++l->stats->calls_out;
  auto deadline = DeadlineFor(d);
  auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now());
  link_wire::Header h;
  h.type = one_way ? link_wire::MsgType::kNotify : link_wire::MsgType::kCall;
  h.target = ps.remote_id;
  h.timeout_us = static_cast<uint32_t>(std::clamp<int64_t>(left.count(), 1, UINT32_MAX));
  bool silent = one_way && (d.flags & shm::kFlagNoCompletion) != 0;
  const bool traced = !one_way && (d.flags & shm::kFlagTrace) != 0;
  uint64_t call_id = 0;
  if (!silent) {
    call_id = next_id_++;
    h.id = call_id;
    PendingCall call{SessionCaller{s.id(), d.tag},
                     LinkServer{l->id, d.target, one_way, d.payload_len}, deadline};
    if (traced) {
      call.trace = CallTrace{d.local_offset, SteadyNs(handling_since_), 0, 0, 0};
      h.reason |= link_wire::kTraceBit;
    }
    calls_.Add(call_id, call);
    ++s.inflight;
  } else {
    CountDone(shm::Op::kNotify, Code::kOk, d.payload_len);
  }
  SendMessage(*l, h, s.AppPayload(d.payload_off, d.payload_len));
  if (traced && !l->failed) {
    // Posted at once, or waiting in the backlog (PumpBacklog notes it).
    if (!l->backlog.empty() && l->backlog.back().header.id == call_id &&
        l->backlog.back().header.type == link_wire::MsgType::kCall) {
      l->backlog.back().trace_call = call_id;
    } else {
      NoteTracePosted(call_id);
    }
  }
}

void Engine::NoteTracePosted(uint64_t call_id) {
  PendingCall* call = calls_.FindMutable(call_id);
  if (call != nullptr && call->trace && call->trace->posted_ns == 0)
    call->trace->posted_ns = SteadyNs(Clock::now());
}

// ---- Calls from peers ------------------------------------------------------

void Engine::OnIncomingCall(EngineLink& l, const link_wire::Header& h,
                            std::span<const std::byte> payload) {
  ++l.stats->calls_in;
  bool one_way = h.type == link_wire::MsgType::kNotify;
  auto refuse = [&](const Status& why) {
    if (h.id != 0) SendReply(l.id, h.id, why.code(), AsBytes(why.message()), why.reason());
  };
  if (draining_)
    return refuse(Status(Code::kUnavailable, "the daemon is draining (shutting down)"));
  uint32_t timeout_us = std::max<uint32_t>(h.timeout_us, 1);
  const Clock::time_point received = Clock::now();
  auto deadline = received + std::chrono::microseconds(timeout_us);
  auto offered =
      OfferToService(LinkCaller{l.id, h.id}, h.target, payload, deadline, timeout_us, one_way);
  if (!offered.ok()) return refuse(offered.status());
  if (!one_way && (h.reason & link_wire::kTraceBit) != 0) {
    if (PendingCall* call = calls_.FindMutable(*offered)) {
      call->trace = CallTrace{};
      call->trace->received_ns = SteadyNs(received);
      call->trace->delivered_ns = SteadyNs(Clock::now());
    }
  }
  if (one_way && h.id != 0) SendReply(l.id, h.id, Code::kOk, {});
}

// ---- Replies ---------------------------------------------------------------

void Engine::HandleReply(Session& s, const shm::SubmitDesc& d) {
  if (!s.InAppHalf(d.payload_off, d.payload_len)) {
    Reject(s, d, Code::kOutOfRange,
           "reply payload " + Range(d.payload_off, d.payload_len) +
               " is outside the app half of the arena");
    return;
  }
  if (!IsKnownCode(d.status)) {
    Reject(s, d, Code::kInvalid,
           "reply status " + std::to_string(d.status) + " is not a known code");
    return;
  }
  const PendingCall* pending = calls_.Find(d.target);
  if (pending == nullptr || !pending->served_by_session(s.id())) {
    Decline(s, d, Code::kNotFound,
            "call " + std::to_string(d.target) +
                " is not pending for this session (timed out, or its caller went away)");
    return;
  }
  std::optional<PendingCall> taken = calls_.Take(d.target);
  if (!taken) return;  // Find() found it just above
  PendingCall call = *taken;
  // A traced call's answer tells the caller how long the app had it.
  answer_taken_ns_ = call.trace ? SteadyNs(handling_since_) : 0;
  Status answered =
      AnswerCaller(call, static_cast<Code>(d.status), s.AppPayload(d.payload_off, d.payload_len));
  answer_taken_ns_ = 0;
  if (!answered.ok()) {
    Decline(s, d, answered.code(), answered.message());
    return;
  }
  if ((d.flags & shm::kFlagNoCompletion) == 0) {
    Complete(s, shm::Op::kReply, d.tag, Code::kOk, {}, d.payload_len);
  } else {
    CountDone(shm::Op::kReply, Code::kOk, 0);
  }
}

void Engine::OnReply(EngineLink& l, const link_wire::Header& h,
                     std::span<const std::byte> payload) {
  const PendingCall* pending = calls_.Find(h.id);
  if (pending == nullptr || !pending->served_on_link(l.id)) return;  // late
  std::optional<PendingCall> call = calls_.Take(h.id);
  if (!call) return;
  const Clock::time_point replied = Clock::now();
  // A number this build does not know (a newer peer's) reads INTERNAL / NONE.
  const Code code = CodeFromWire(h.status);
  (void)AnswerCaller(*call, code, payload, ReasonFromWire(h.reason & ~link_wire::kTraceBit));
  if (call->trace) RecordTrace(l, h, *call, code, payload.size(), replied);
}

void Engine::RecordTrace(const EngineLink& l, const link_wire::Header& h, const PendingCall& call,
                         Code code, uint64_t reply_bytes, Clock::time_point replied) {
  if (!call.trace) return;
  const CallTrace& t = *call.trace;
  TraceRecord r;
  r.session = std::get<SessionCaller>(call.caller).session;
  r.peer = l.routed ? l.spec.peer + " (routed)" : l.spec.peer;
  r.transport = std::string(TransportName(l.spec.transport));
  if (const auto* to = std::get_if<LinkServer>(&call.server)) r.request_bytes = to->bytes;
  r.reply_bytes = reply_bytes;
  r.code = code;
  r.submit_ns = t.submit_ns;
  r.pickup_ns = t.pickup_ns;
  r.posted_ns = t.posted_ns;
  r.reply_ns = SteadyNs(replied);
  r.completed_ns = SteadyNs(Clock::now());
  if ((h.reason & link_wire::kTraceBit) != 0) {
    r.remote_timed = true;
    r.remote_ns = h.timeout_us;
    r.remote_app_ns = h.target;
  }
  traces_.Add(std::move(r));
}

std::vector<TraceRecord> Engine::TraceNow(uint64_t session, size_t max, bool clear) {
  std::vector<TraceRecord> out = traces_.Snapshot(session, max);
  if (clear) traces_.Clear();
  return out;
}

}  // namespace mcdma::daemon
