// The data path of links: installing and dropping connections, posting
// message fragments from send slots, reassembling what arrives in receive
// slots, and dispatching calls, replies, revocations and echoes. Engine
// thread only.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "engine/engine.hpp"
#include "mcdma_internal/shm_segment.hpp"
#include "mcdma_internal/wait.hpp"

namespace mcdma::daemon {
namespace {
// wr_id spaces on a link connection: transfer ids stay below 2^56.
constexpr uint64_t kSendTag = 1ULL << 62;
constexpr uint64_t kRecvTag = 1ULL << 61;
constexpr uint64_t kSlotMask = (1ULL << 32) - 1;
constexpr size_t kLinkPollBatch = 32;
// Unsent bytes a link may queue while its peer grants no receive credit;
// beyond it the peer is treated as gone (it is not taking data).
constexpr uint64_t kMaxBacklogBytes = 256ULL << 20;
// The largest echo (mcdmactl link test) a peer may send.
constexpr uint32_t kMaxEchoBytes = 64U << 20;

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
  l->conn = std::move(conn);
  l->device = device(spec.transport);
  if (l->device == nullptr)
    return Status(Code::kInvalid,
                  "no device for a " + std::string(TransportName(spec.transport)) + " link");
  const driver::Caps& caps = l->conn->caps();
  l->slots = options_.link_recv_slots;
  l->slot_bytes = options_.link_slot_bytes;
  // All slots are one registration: fewer of them where the device limits
  // registrations (mcdma-cx5: 4 MiB), never fewer than 4.
  uint64_t most = caps.max_registration_bytes / PageSize() * PageSize();
  while (l->slots > 4 && uint64_t{2} * l->slots * l->slot_bytes > most) l->slots /= 2;
  if (uint64_t{2} * l->slots * l->slot_bytes > most) {
    l->slot_bytes = static_cast<uint32_t>(most / (uint64_t{2} * l->slots));
  }
  l->fragment_bytes = l->slot_bytes;
  if (spec.peer_slot_bytes != 0) {
    if (spec.peer_slot_bytes <= link_wire::kHeaderBytes)
      return Status(Code::kInvalid, "peer's receive slots are too small");
    l->fragment_bytes = std::min(l->slot_bytes, spec.peer_slot_bytes);
  }
  // The transport's own limit on one SEND (verbs: the peer's ring slots).
  if (caps.max_message_bytes != 0) {
    if (caps.max_message_bytes <= link_wire::kHeaderBytes)
      return Status(Code::kInvalid, "the transport's messages are too small for a header");
    l->fragment_bytes =
        static_cast<uint32_t>(std::min<uint64_t>(l->fragment_bytes, caps.max_message_bytes));
  }
  uint64_t bytes = RoundUpToPage(uint64_t{2} * l->slots * l->slot_bytes);
  l->memory.reset(static_cast<std::byte*>(std::aligned_alloc(PageSize(), bytes)));
  if (!l->memory) return Status(Code::kNoMemory, "cannot allocate link slots");
  MCDMA_ASSIGN_OR_RETURN(l->region,
                         l->device->Register(l->memory.get(), bytes, driver::kAccessLocal));
  for (uint32_t i = 0; i < l->slots; ++i) {
    Status st = l->conn->PostRecv(kRecvTag | i,
                                  {l->region.get(), uint64_t{i} * l->slot_bytes, l->slot_bytes});
    if (!st.ok()) return Status(st.code(), "posting link receive slots: " + st.message());
    l->free_send.push_back(l->slots + i);
  }
  uint64_t id = l->id;
  spdlog::get("engine")->info("link {} to '{}' ({}) up: generation {}, transport {}", id, spec.peer,
                              OriginName(spec.origin), spec.generation, l->conn->caps().name);
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
  for (auto& echo : links_.TakeEchoesOn(link_id)) echo.done(Status(code, msg));
  l.reset();  // closes the connection
  if (on_link_down_) on_link_down_(link_id, why);
}

void Engine::DropPeer(const std::string& peer, Code code, const std::string& why) {
  for (uint64_t id : links_.IdsTo(peer)) DropLink(id, code, why);
}

std::vector<LinkSnapshot> Engine::Links() const {
  return links_.Snapshots([this](uint64_t id) {
    uint32_t n = calls_.CountOnLink(id);
    return n + transfers_.CountOnLink(id);
  });
}

// ---- Sending -------------------------------------------------------------

bool Engine::PostFragments(EngineLink& l, EngineLink::Outgoing& m,
                           std::span<const std::byte> payload) {
  const uint32_t total = m.header.total_len;
  while (!m.started || m.sent < total) {
    if (l.free_send.empty()) return false;
    uint32_t slot = l.free_send.back();
    uint32_t n = std::min(l.payload_per_fragment(), total - m.sent);
    link_wire::Header h = m.header;
    h.frag_off = m.sent;
    link_wire::Encode(h, l.slot(slot));
    if (n > 0) std::memcpy(l.slot(slot) + link_wire::kHeaderBytes, payload.data() + m.sent, n);
    Status st = l.conn->PostSend(kSendTag | slot, {l.region.get(), uint64_t{slot} * l.slot_bytes,
                                                   link_wire::kHeaderBytes + n});
    if (st.code() == Code::kBusy) return false;
    if (!st.ok()) {
      FailLink(l, st.code(), "posting a send: " + st.message());
      return false;
    }
    l.free_send.pop_back();
    m.started = true;
    m.sent += n;
    ++l.stats->messages_sent;
    l.stats->bytes_sent += link_wire::kHeaderBytes + n;
  }
  return true;
}

void Engine::SendMessage(EngineLink& l, link_wire::Header h, std::span<const std::byte> payload) {
  if (l.failed) return;
  h.total_len = static_cast<uint32_t>(payload.size());
  EngineLink::Outgoing m;
  m.header = h;
  if (l.backlog.empty() && PostFragments(l, m, payload)) return;
  if (l.failed) return;
  // Keep the unsent rest: the app may reuse its arena range once we return.
  if (l.backlog_bytes + payload.size() > kMaxBacklogBytes) {
    FailLink(l, Code::kLinkDown,
             "the peer takes no data: more than " + std::to_string(kMaxBacklogBytes >> 20) +
                 " MiB wait to be sent");
    return;
  }
  l.backlog_bytes += payload.size();
  m.payload.assign(reinterpret_cast<const char*>(payload.data()), payload.size());
  l.backlog.push_back(std::move(m));
}

bool Engine::PumpBacklog(EngineLink& l) {
  bool did = false;
  while (!l.backlog.empty() && !l.failed) {
    EngineLink::Outgoing& m = l.backlog.front();
    uint32_t before = m.sent;
    bool done = PostFragments(l, m, AsBytes(m.payload));
    did |= m.sent != before || done;
    if (!done) break;
    l.backlog_bytes -= m.payload.size();
    l.backlog.pop_front();
  }
  return did;
}

void Engine::SendReply(uint64_t link_id, uint64_t id, Code code, std::span<const std::byte> payload,
                       Reason reason) {
  EngineLink* l = FindLink(link_id);
  if (l == nullptr) return;
  link_wire::Header h;
  h.type = link_wire::MsgType::kReply;
  h.id = id;
  h.status = static_cast<uint16_t>(code);
  h.reason = static_cast<uint32_t>(reason);
  SendMessage(*l, h, payload);
}

// ---- Receiving -----------------------------------------------------------

bool Engine::ProgressLinks() {
  // Cleared before polling: a notification after this point is seen by
  // HasWork before the engine sleeps.
  link_pending_.store(false);
  if (links_.empty()) return false;
  bool did = false;
  driver::WorkCompletion wcs[kLinkPollBatch];
  for (auto& [id, lp] : links_) {
    EngineLink& l = *lp;
    size_t n = l.failed ? 0 : l.conn->Poll(wcs);
    for (size_t i = 0; i < n && !l.failed; ++i) {
      const driver::WorkCompletion& wc = wcs[i];
      if (wc.op == driver::WorkOp::kRead || wc.op == driver::WorkOp::kWrite) {
        --l.transfers;
        OnTransferCompletion(wc, /*over_link=*/true);
        if (wc.code == Code::kLinkDown) FailLink(l, wc.code, wc.detail);
      } else if (wc.code != Code::kOk) {
        // Whatever the transport saw, the link is unusable: its operations
        // end LINK_DOWN, with what happened in the message.
        FailLink(l, Code::kLinkDown, LinkFailureText(wc.code, wc.detail));
      } else if (wc.op == driver::WorkOp::kSend) {
        l.free_send.push_back(static_cast<uint32_t>(wc.wr_id & kSlotMask));
      } else {
        auto slot = static_cast<uint32_t>(wc.wr_id & kSlotMask);
        OnFragment(l, slot, wc.byte_len);
        if (l.failed) break;
        Status st = l.conn->PostRecv(wc.wr_id,
                                     {l.region.get(), uint64_t{slot} * l.slot_bytes, l.slot_bytes});
        if (!st.ok()) FailLink(l, st.code(), "re-posting a receive: " + st.message());
      }
    }
    did |= n > 0;
    did |= PumpBacklog(l);
  }
  std::vector<std::pair<uint64_t, std::pair<Code, std::string>>> dead;
  for (auto& [id, l] : links_) {
    if (l->failed) dead.push_back({id, {l->fail_code, l->fail_reason}});
  }
  for (auto& [id, why] : dead) DropLink(id, why.first, why.second);
  return did || !dead.empty();
}

void Engine::OnFragment(EngineLink& l, uint32_t slot, uint32_t len) {
  ++l.stats->messages_received;
  l.stats->bytes_received += len;
  // Nothing legitimate is larger than an app's arena half (a call or a
  // reply) or an echo.
  uint64_t limit = std::max<uint64_t>(options_.max_arena_bytes / 2, kMaxEchoBytes);
  auto message = l.incoming.Feed({l.slot(slot), len}, limit);
  if (!message.ok()) {
    FailLink(l, message.status().code(), message.status().message());
    return;
  }
  const auto& complete = *message;
  if (complete) Dispatch(l, complete->header, complete->payload);
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
      // RDMA accesses to it is still posted.
      if (l.verbs()) {
        transfers_.OweRevokeAck(l.id, h.target);
        SendRevokeAcks();
      }
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
      if (auto echo = links_.TakeEcho(h.id)) echo->done(std::string(AsText(payload)));
      break;
    }
  }
}

// ---- Echo (mcdmactl link test) ---------------------------------------------

Result<uint64_t> Engine::StartEcho(const std::string& peer, std::string payload,
                                   std::function<void(Result<std::string>)> done,
                                   LinkSnapshot* used) {
  EngineLink* l = LinkTo(peer);
  if (l == nullptr) return Status(Code::kLinkDown, "no link to '" + peer + "' is up");
  if (payload.size() > link_wire::kMaxMessageBytes)
    return Status(Code::kInvalid, "echo payload too large");
  uint64_t seq = next_id_++;
  link_wire::Header h;
  h.type = link_wire::MsgType::kEcho;
  h.id = seq;
  SendMessage(*l, h, AsBytes(payload));
  links_.AddEcho(seq, LinkTable::EchoWaiter{l->id, std::move(payload), std::move(done)});
  if (used != nullptr) {
    used->transport = l->spec.transport;
    used->generation = l->spec.generation;
  }
  return seq;
}

void Engine::CancelEcho(uint64_t seq) { (void)links_.TakeEcho(seq); }

}  // namespace mcdma::daemon
