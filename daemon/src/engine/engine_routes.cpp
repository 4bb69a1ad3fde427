// Routed links and relaying (docs/architecture.md §23): messages between
// hosts without a link of their own travel whole, in kRouted envelopes,
// from daemon to daemon along the route the fabric computed. Each end
// keeps a routed EngineLink whose sequence numbers and acks are end to
// end; relays forward envelopes without looking inside. Engine thread
// only.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "engine/engine.hpp"
#include "engine/route_wire.hpp"

namespace mcdma::daemon {
namespace {

// Unacknowledged routed messages are sent again when no ack came for the
// resend timeout: the smoothed round trip of acked messages plus four
// deviations (it includes the queues on the way: a full window on a slow
// route takes a while), at least this, doubled after each resend that
// brought no ack (a relay dropped them, or a route broke without anyone
// noticing).
constexpr auto kMinRoutedResendAfter = std::chrono::milliseconds(500);
constexpr uint32_t kMaxResendBackoff = 3;
// Bytes a relay lets wait on one outgoing link for others' traffic; beyond
// it a routed message is dropped (its origin sends it again).
constexpr uint64_t kRelayBudgetBytes = 32ULL << 20;
// A routed link fails when nothing it sent was acknowledged for this many
// link timeouts (a route change takes a link timeout to notice, then the
// membership's tick and the other end's).
constexpr int kRoutedAckTimeouts = 4;
// A routed link's window: messages sent and not acknowledged end to end.
constexpr size_t kMaxRoutedUnacked = 256;
constexpr uint64_t kMaxRoutedUnackedBytes = 16ULL << 20;
// Routed lookups waiting for their answer, at most.
constexpr size_t kMaxRoutedLookups = 1024;

std::shared_ptr<spdlog::logger> Log() { return spdlog::get("engine"); }

}  // namespace

void Engine::SetRoutes(std::string self_instance, std::map<std::string, Route> routes) {
  instance_ = std::move(self_instance);
  for (auto& [id, lp] : links_) {
    EngineLink& l = *lp;
    if (!l.routed || l.failed) continue;
    auto it = routes.find(l.spec.peer);
    const std::string next = it == routes.end() ? std::string() : it->second.next_hop;
    if (it != routes.end() && !it->second.instance.empty() && !l.spec.peer_instance.empty() &&
        it->second.instance != l.spec.peer_instance) {
      FailLink(l, Code::kPeerGone, "'" + l.spec.peer + "' restarted");
      continue;
    }
    if (next == l.next_hop) continue;
    Log()->info("routed link {} to '{}': next hop {} (was {})", l.id, l.spec.peer,
                next.empty() ? std::string("none") : "'" + next + "'",
                l.next_hop.empty() ? std::string("none") : "'" + l.next_hop + "'");
    l.next_hop = next;
    ++l.route_changes;
    if (next.empty()) {
      l.no_route_since = Clock::now();
    } else {
      ResendRouted(l, "the route changed");
    }
  }
  routes_ = std::move(routes);
}

EngineLink* Engine::RoutedLinkTo(const std::string& peer, const std::string& peer_instance) {
  for (auto& [id, lp] : links_) {
    EngineLink& l = *lp;
    if (!l.routed || l.spec.peer != peer) continue;
    if (l.failed) return nullptr;  // dropped at the end of this pass
    if (!peer_instance.empty() && !l.spec.peer_instance.empty() &&
        l.spec.peer_instance != peer_instance) {
      // The peer restarted: what this link holds is for its old instance.
      DropLink(l.id, Code::kPeerGone, "'" + peer + "' restarted");
      break;
    }
    if (l.spec.peer_instance.empty()) l.spec.peer_instance = peer_instance;
    return &l;
  }
  auto l = std::make_unique<EngineLink>();
  l->id = next_id_++;
  l->routed = true;
  l->spec.peer = peer;
  l->spec.origin = LinkOrigin::kRouted;
  l->spec.generation = 1;
  l->spec.transport = Transport::kTcp;
  l->spec.peer_instance = peer_instance;
  auto it = routes_.find(peer);
  if (it != routes_.end()) {
    l->next_hop = it->second.next_hop;
    if (l->spec.peer_instance.empty()) l->spec.peer_instance = it->second.instance;
  }
  l->no_route_since = Clock::now();
  l->ack_progress = Clock::now();
  Log()->info("routed link {} to '{}': next hop {}", l->id, peer,
              l->next_hop.empty() ? std::string("none") : "'" + l->next_hop + "'");
  return &links_.Add(std::move(l));
}

EngineLink* Engine::DirectLinkTo(const std::string& peer) {
  EngineLink* l = links_.To(peer);
  return l != nullptr && !l->routed ? l : nullptr;
}

Result<EngineLink*> Engine::RouteTo(const std::string& peer) {
  if (EngineLink* direct = DirectLinkTo(peer)) return direct;
  auto it = routes_.find(peer);
  if (it == routes_.end() || it->second.next_hop.empty())
    return Status(Code::kLinkDown, "no link to peer '" + peer + "' is up, and no route to it");
  EngineLink* l = RoutedLinkTo(peer, it->second.instance);
  if (l == nullptr) return Status(Code::kLinkDown, "the route to '" + peer + "' is being reset");
  return l;
}

bool Engine::PumpRouted(EngineLink& l) {
  EngineLink* next = l.next_hop.empty() ? nullptr : DirectLinkTo(l.next_hop);
  if (next == nullptr) return false;
  bool did = false;
  while (!l.backlog.empty() && !l.failed && !next->failed) {
    EngineLink::Outgoing& m = l.backlog.front();
    const bool sequenced = m.header.seq != 0;
    if (sequenced && m.header.seq <= l.acked) {
      l.backlog_bytes -= m.payload.size();
      l.backlog.pop_front();
      continue;
    }
    if (sequenced && !l.unacked.empty() &&
        (l.unacked.size() >= kMaxRoutedUnacked ||
         l.unacked_bytes + m.payload.size() > kMaxRoutedUnackedBytes))
      break;
    // The next hop's link is shared with others' traffic: this end waits
    // rather than fill it past the relay budget.
    if (next->backlog_bytes != 0 && next->backlog_bytes + m.payload.size() > kRelayBudgetBytes)
      break;
    link_wire::Header inner = m.header;
    inner.ack = l.delivered;
    std::string env =
        route_wire::Encode(0, options_.host_id, l.spec.peer, instance_, l.spec.peer_instance, l.id,
                           l.peer_epoch, inner, AsBytes(m.payload));
    link_wire::Header outer;
    outer.type = link_wire::MsgType::kRouted;
    SendMessage(*next, outer, AsBytes(env));
    l.ack_sent = std::max(l.ack_sent, l.delivered);
    l.bytes_since_ack = 0;
    ++l.stats->messages_sent;
    l.stats->bytes_sent += env.size();
    did = true;
    l.backlog_bytes -= m.payload.size();
    if (sequenced) {
      const auto now = Clock::now();
      if (l.unacked.empty()) l.ack_progress = now;
      m.sent_at = now;
      l.unacked_bytes += m.payload.size();
      const uint64_t seq = m.header.seq;
      l.unacked.emplace(seq, std::move(m));
    }
    l.backlog.pop_front();
  }
  return did;
}

Clock::duration Engine::RoutedResendTimeout(const EngineLink& l) {
  Clock::duration rto =
      std::max<Clock::duration>(kMinRoutedResendAfter, l.routed_srtt + 4 * l.routed_rttvar);
  return rto * (1 << l.resend_backoff);
}

void Engine::NoteRoutedAck(EngineLink& l, uint64_t ack, Clock::time_point now) {
  // One round-trip sample per ack, from the newest message it covers that
  // went once (Karn: a message sent again says nothing of the route).
  auto it = l.unacked.upper_bound(ack);
  if (it != l.unacked.begin()) {
    --it;
    const EngineLink::Outgoing& m = it->second;
    if (!m.sent_again && m.sent_at != Clock::time_point{}) {
      const Clock::duration sample = now - m.sent_at;
      if (l.routed_srtt == Clock::duration{}) {
        l.routed_srtt = sample;
        l.routed_rttvar = sample / 2;
      } else {
        const Clock::duration err =
            sample > l.routed_srtt ? sample - l.routed_srtt : l.routed_srtt - sample;
        l.routed_rttvar = (3 * l.routed_rttvar + err) / 4;
        l.routed_srtt = (7 * l.routed_srtt + sample) / 8;
      }
    }
  }
  l.ack_progress = now;
  l.resend_backoff = 0;
}

void Engine::ResendRouted(EngineLink& l, const char* why) {
  if (l.unacked.empty()) return;
  std::vector<EngineLink::Outgoing> again;
  again.reserve(l.unacked.size());
  for (auto& [seq, m] : l.unacked) {
    l.backlog_bytes += m.payload.size();
    m.sent_again = true;
    again.push_back(std::move(m));
  }
  l.resent += again.size();
  Log()->info("routed link {} to '{}': {} unacknowledged messages sent again ({})", l.id,
              l.spec.peer, again.size(), why);
  l.backlog.insert(l.backlog.begin(), std::make_move_iterator(again.begin()),
                   std::make_move_iterator(again.end()));
  l.unacked.clear();
  l.unacked_bytes = 0;
  // ack_progress stays: a route that never answers still fails the link.
  l.last_resend = Clock::now();
}

void Engine::ProgressRouted(EngineLink& l, Clock::time_point now) {
  const auto timeout = std::chrono::milliseconds(options_.link_timeout_ms);
  EngineLink* next = l.next_hop.empty() ? nullptr : DirectLinkTo(l.next_hop);
  if (next == nullptr) {
    if (l.no_route_since == Clock::time_point{}) l.no_route_since = now;
    if (now - l.no_route_since > timeout &&
        (!l.unacked.empty() || !l.backlog.empty() || calls_.CountOnLink(l.id) != 0 ||
         transfers_.CountOnLink(l.id) != 0)) {
      FailLink(l, Code::kLinkDown,
               "no route to '" + l.spec.peer + "' for " + std::to_string(timeout.count()) + " ms");
    }
    return;
  }
  l.no_route_since = Clock::time_point{};
  if (!l.unacked.empty()) {
    if (now - l.ack_progress > kRoutedAckTimeouts * timeout) {
      FailLink(l, Code::kLinkDown,
               "'" + l.spec.peer + "' acknowledged nothing for " +
                   std::to_string(kRoutedAckTimeouts * timeout.count()) +
                   " ms over the route via '" + l.next_hop + "'");
      return;
    }
    const auto rto = RoutedResendTimeout(l);
    if (now - std::max(l.ack_progress, l.last_resend) > rto) {
      ResendRouted(l, "nothing acknowledged in time");
      l.resend_backoff = std::min(l.resend_backoff + 1, kMaxResendBackoff);
    }
  }
  // Acks go back at once: the sender's window and resends wait on them.
  if (l.delivered > l.ack_sent) {
    link_wire::Header h;
    h.type = link_wire::MsgType::kAck;
    SendMessage(l, h, {});
  }
}

void Engine::OnRouted(EngineLink& from, std::span<const std::byte> payload) {
  std::string why;
  auto env = route_wire::Decode(payload, &why);
  if (!env) {
    FailLink(from, Code::kLinkDown, "protocol error: " + why);
    return;
  }
  auto drop = [&](uint64_t& counter, const std::string& what) {
    ++counter;
    // One line per reason and second at most: a hostile peer must not
    // flood the log.
    auto now = Clock::now();
    if (now - relay_.last_log > std::chrono::seconds(1)) {
      relay_.last_log = now;
      Log()->warn("routed message from '{}' to '{}' (via '{}', {} hops) dropped: {}", env->origin,
                  env->dest, from.spec.peer, env->hops, what);
    }
  };
  if (env->hops == 0 && env->origin != from.spec.peer)
    return drop(relay_.refused, "its first hop names another host as its origin");
  if (env->origin == options_.host_id) return drop(relay_.looped, "it came back to its origin");
  if (env->dest == options_.host_id) {
    if (!env->dest_instance.empty() && !instance_.empty() && env->dest_instance != instance_)
      return drop(relay_.stale, "it is for an earlier instance of this daemon");
    EngineLink* l = RoutedLinkTo(env->origin, env->origin_instance);
    if (l == nullptr) return drop(relay_.stale, "its routed link is being reset");
    if (l->peer_epoch != 0 && env->sender_epoch < l->peer_epoch)
      return drop(relay_.stale, "it belongs to an earlier routed link of its origin");
    if (env->sender_epoch > l->peer_epoch) {
      if (l->peer_epoch != 0 && env->ack_epoch != l->id) {
        // The origin started a new routed link that knows nothing of this
        // one: both start over (what this one had in flight fails).
        const std::string origin = env->origin;
        DropLink(l->id, Code::kLinkDown, "'" + origin + "' started its routed link over");
        l = RoutedLinkTo(origin, env->origin_instance);
        if (l == nullptr) return drop(relay_.stale, "its routed link is being reset");
      } else {
        // Its new link answers this one: receive its messages from 1.
        l->delivered = 0;
        l->ack_sent = 0;
        l->bytes_since_ack = 0;
        l->early.clear();
        l->early_bytes = 0;
      }
      l->peer_epoch = env->sender_epoch;
    }
    link_wire::Header inner = env->inner;
    if (env->ack_epoch != l->id) inner.ack = 0;  // an ack of another link of ours
    ++l->stats->messages_received;
    l->stats->bytes_received += payload.size();
    ++relay_.delivered;
    Deliver(*l, inner, env->payload);
    return;
  }
  // A relay: forward it, one hop further.
  if (env->hops + 1 >= route_wire::kMaxHops)
    return drop(relay_.hop_limit, "it crossed " + std::to_string(env->hops + 1) +
                                      " links (the limit is " +
                                      std::to_string(route_wire::kMaxHops) + ")");
  EngineLink* next = DirectLinkTo(env->dest);
  if (next == nullptr) {
    auto it = routes_.find(env->dest);
    if (it != routes_.end() && !it->second.next_hop.empty())
      next = DirectLinkTo(it->second.next_hop);
  }
  if (next == nullptr) return drop(relay_.no_route, "no route to '" + env->dest + "' here");
  if (next == &from) return drop(relay_.looped, "its route leads back where it came from");
  if (next->backlog_bytes + payload.size() > kRelayBudgetBytes)
    return drop(relay_.full, "the relay budget toward '" + next->spec.peer + "' is spent");
  std::string fwd(reinterpret_cast<const char*>(payload.data()), payload.size());
  route_wire::SetHops(fwd, static_cast<uint8_t>(env->hops + 1));
  link_wire::Header outer;
  outer.type = link_wire::MsgType::kRouted;
  ++relay_.forwarded;
  relay_.forwarded_bytes += fwd.size();
  SendMessage(*next, outer, AsBytes(fwd));
}

Status Engine::StartRoutedLookup(const std::string& peer, const std::string& service,
                                 std::function<void(Result<RoutedLookup>)> done) {
  MCDMA_ASSIGN_OR_RETURN(EngineLink * l, RouteTo(peer));
  if (!l->routed) return Status(Code::kInvalid, "'" + peer + "' has a link of its own");
  if (l->next_hop.empty() || DirectLinkTo(l->next_hop) == nullptr)
    return Status(Code::kLinkDown, "no route to '" + peer + "' is up");
  if (lookups_.size() >= kMaxRoutedLookups)
    return Status(Code::kBusy, "too many routed lookups in progress");
  uint64_t id = next_id_++;
  link_wire::Header h;
  h.type = link_wire::MsgType::kLookup;
  h.id = id;
  lookups_.emplace(id, LookupWaiter{l->id, std::move(done)});
  SendMessage(*l, h, AsBytes(service));
  return Status::Ok();
}

void Engine::CancelRoutedLookup(uint64_t link_id) {
  for (auto it = lookups_.begin(); it != lookups_.end();) {
    if (it->second.link == link_id) {
      auto done = std::move(it->second.done);
      it = lookups_.erase(it);
      done(Status(Code::kLinkDown, "the routed link went down"));
    } else {
      ++it;
    }
  }
  for (auto it = resolves_.begin(); it != resolves_.end();) {
    if (it->second.link == link_id) {
      auto done = std::move(it->second.done);
      it = resolves_.erase(it);
      done(Status(Code::kLinkDown, "the routed link went down"));
    } else {
      ++it;
    }
  }
}

void Engine::OnLookup(EngineLink& l, const link_wire::Header& h,
                      std::span<const std::byte> payload) {
  link_wire::Header r;
  r.type = link_wire::MsgType::kLookupReply;
  r.id = h.id;
  if (!l.routed) {
    FailLink(l, Code::kLinkDown, "protocol error: a lookup on a link of its own");
    return;
  }
  auto found = LookupForPeer(std::string(AsText(payload)));
  if (!found.ok()) {
    r.status = static_cast<uint16_t>(found.status().code());
    r.reason = static_cast<uint32_t>(found.status().reason());
    SendMessage(l, r, AsBytes(found.status().message()));
    return;
  }
  r.target = found.value();
  SendMessage(l, r, AsBytes(instance_));
}

void Engine::OnLookupReply(EngineLink& l, const link_wire::Header& h,
                           std::span<const std::byte> payload) {
  auto it = lookups_.find(h.id);
  if (it == lookups_.end() || it->second.link != l.id) return;  // late
  auto done = std::move(it->second.done);
  lookups_.erase(it);
  Code code = CodeFromWire(h.status);
  if (code != Code::kOk) {
    done(Status(code, ReasonFromWire(h.reason), std::string(AsText(payload))));
    return;
  }
  done(RoutedLookup{h.target, l.spec.peer_instance});
}

RelayStats Engine::relay_stats() {
  RelayStats s;
  s.forwarded = relay_.forwarded;
  s.forwarded_bytes = relay_.forwarded_bytes;
  s.delivered = relay_.delivered;
  s.dropped_hop_limit = relay_.hop_limit;
  s.dropped_no_route = relay_.no_route;
  s.dropped_full = relay_.full;
  s.dropped_stale = relay_.stale;
  s.dropped_refused = relay_.refused;
  s.dropped_looped = relay_.looped;
  for (const auto& [id, lp] : links_) {
    if (!lp->routed) continue;
    RoutedSnapshot r;
    r.peer = lp->spec.peer;
    r.next_hop = lp->next_hop;
    r.peer_instance = lp->spec.peer_instance;
    r.unacked = lp->unacked.size();
    r.resent = lp->resent;
    r.route_changes = lp->route_changes;
    r.messages_sent = lp->stats->messages_sent;
    r.messages_received = lp->stats->messages_received;
    r.calls_out = lp->stats->calls_out;
    r.calls_in = lp->stats->calls_in;
    s.routed.push_back(std::move(r));
  }
  return s;
}

}  // namespace mcdma::daemon
