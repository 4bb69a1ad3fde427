// Rails: the connections of one link (docs/architecture.md §21). Setting a
// rail's slots up, adding and taking rails out, which rail carries the
// messages and which one the next slice of a transfer, and what happens to
// a failed rail's work: its slices are posted again on the others, its
// unacknowledged messages sent again (the peer drops what it already has).
// Engine thread only.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "driver/tcp/tcp_transport.hpp"
#include "engine/engine.hpp"
#include "mcdma_internal/shm_segment.hpp"

namespace mcdma::daemon {
namespace {
// One-sided bytes a rail may have posted at once: enough to keep a fast
// rail busy, few enough that a failed rail's share is quickly reissued.
constexpr uint64_t kMinRailInflightBytes = 4ULL << 20;
constexpr uint64_t kRailInflightSlices = 8;
constexpr uint64_t kMessageRailSlices = 2;
// Smoothing of a rail's throughput samples.
constexpr double kRateWeight = 0.2;
constexpr double kRateWindowSeconds = 0.020;
constexpr double kRateMinSeconds = 0.002;
// A rail left out as far slower than the best (rail_min_share) is given
// work again once its estimate is this old, and its next sample replaces
// the estimate: one slow early window (a busy host) must not keep a rail
// out for good, since a rail left out is never measured again.
constexpr auto kRateStaleAfter = std::chrono::milliseconds(500);
}  // namespace

Status Engine::SetUpRail(Rail& r, uint32_t peer_slot_bytes) {
  const driver::Caps& caps = r.conn->caps();
  r.slots = options_.link_recv_slots;
  r.slot_bytes = options_.link_slot_bytes;
  // All slots are one registration: fewer of them where the device limits
  // registrations (mcdma-cx5: 4 MiB), never fewer than 4.
  uint64_t most = caps.max_registration_bytes / PageSize() * PageSize();
  while (r.slots > 4 && uint64_t{2} * r.slots * r.slot_bytes > most) r.slots /= 2;
  if (uint64_t{2} * r.slots * r.slot_bytes > most) {
    r.slot_bytes = static_cast<uint32_t>(most / (uint64_t{2} * r.slots));
  }
  r.fragment_bytes = r.slot_bytes;
  if (peer_slot_bytes != 0) {
    if (peer_slot_bytes <= link_wire::kHeaderBytes)
      return Status(Code::kInvalid, "peer's receive slots are too small");
    r.fragment_bytes = std::min(r.slot_bytes, peer_slot_bytes);
  }
  // The transport's own limit on one SEND (verbs: the peer's ring slots).
  if (caps.max_message_bytes != 0) {
    if (caps.max_message_bytes <= link_wire::kHeaderBytes)
      return Status(Code::kInvalid, "the transport's messages are too small for a header");
    r.fragment_bytes =
        static_cast<uint32_t>(std::min<uint64_t>(r.fragment_bytes, caps.max_message_bytes));
  }
  uint64_t bytes = RoundUpToPage(uint64_t{2} * r.slots * r.slot_bytes);
  r.memory.reset(static_cast<std::byte*>(std::aligned_alloc(PageSize(), bytes)));
  if (!r.memory) return Status(Code::kNoMemory, "cannot allocate link slots");
  MCDMA_ASSIGN_OR_RETURN(r.region, r.device->Register(r.memory.get(), bytes, driver::kAccessLocal));
  r.free_send.clear();
  for (uint32_t i = 0; i < r.slots; ++i) {
    Status st = r.conn->PostRecv(kRailRecvTag | i,
                                 {r.region.get(), uint64_t{i} * r.slot_bytes, r.slot_bytes});
    if (!st.ok()) return Status(st.code(), "posting link receive slots: " + st.message());
    r.free_send.push_back(r.slots + i);
  }
  return Status::Ok();
}

Result<std::unique_ptr<driver::Endpoint>> Engine::CreateRailEndpoint(
    const std::string& local_address, std::chrono::milliseconds timeout) {
  auto* tcp = dynamic_cast<driver::tcp::TcpDevice*>(device(Transport::kTcp));
  if (tcp == nullptr) return Status(Code::kUnavailable, "peering is off (no fabric key)");
  return tcp->CreateEndpointOn(local_address, timeout);
}

Result<std::unique_ptr<driver::Endpoint>> Engine::CreateRdmaEndpoint(uint8_t slot) {
  driver::Device* dev = rdma_device(slot);
  if (dev == nullptr) return Status(Code::kInvalid, "no RDMA port in slot " + std::to_string(slot));
  return dev->CreateEndpoint();
}

Status Engine::AddRail(uint64_t link_id, const RailSpec& spec,
                       std::unique_ptr<driver::Connection> conn) {
  EngineLink* l = FindLink(link_id);
  if (l == nullptr || l->failed) return Status(Code::kLinkDown, "the link is gone");
  if (spec.index == 0) return Status(Code::kInvalid, "rail 0 is the link's own connection");
  if (l->rails.size() <= spec.index) l->rails.resize(spec.index + 1);
  std::unique_ptr<Rail>& slot = l->rails[spec.index];
  if (slot != nullptr && slot->conn != nullptr) {
    // A rail that came back before we saw it go: the old connection is
    // dead. Retired here without telling the link manager, which is
    // installing the new one.
    slot->Fail(Code::kLinkDown, "replaced by a new connection of the rail");
    RetireRail(*l, *slot);
  }
  auto r = std::make_unique<Rail>();
  if (slot != nullptr) {
    r->stats = slot->stats;
    r->last_error = slot->last_error;
  }
  r->spec = spec;
  r->conn = std::move(conn);
  r->device = device_at(spec.slot);
  if (r->device == nullptr) return Status(Code::kInvalid, "no device for rail " + spec.local);
  MCDMA_RETURN_IF_ERROR(SetUpRail(*r, spec.peer_slot_bytes));
  // Connected is not proven: the rail carries traffic once its probe's
  // answer came back over it.
  r->probed = false;
  r->probe_sent = Clock::now();
  r->probe_deadline = r->probe_sent + std::chrono::milliseconds(options_.rail_probe_ms);
  Rail& added = *r;
  slot = std::move(r);
  if (!PostBare(*l, added, link_wire::MsgType::kRailProbe))
    added.Fail(Code::kLinkDown, "probe: no send slot on a new rail");
  spdlog::get("engine")->info("link {} to '{}': rail {} connected ({} > {}), probing", link_id,
                              l->spec.peer, spec.index, spec.local, spec.remote);
  link_pending_.store(true);
  return Status::Ok();
}

bool Engine::PostBare(EngineLink& l, Rail& r, link_wire::MsgType type) {
  if (r.free_send.empty()) return false;
  uint32_t slot = r.free_send.back();
  link_wire::Header h;
  h.type = type;
  h.ack = l.delivered;
  link_wire::Encode(h, r.slot(slot));
  Status st = r.conn->PostSend(kRailSendTag | slot, {r.region.get(), uint64_t{slot} * r.slot_bytes,
                                                     link_wire::kHeaderBytes});
  if (st.code() == Code::kBusy) return false;
  if (!st.ok()) {
    r.Fail(st.code(), "posting a probe: " + st.message());
    return false;
  }
  r.free_send.pop_back();
  r.stats.bytes_sent += link_wire::kHeaderBytes;
  return true;
}

void Engine::ProgressProbes(EngineLink& l, Clock::time_point now) {
  for (auto& rp : l.rails) {
    if (rp == nullptr || !rp->live()) continue;
    Rail& r = *rp;
    // The answer goes between messages, never inside one's fragments.
    const bool mid_message = l.message_rail == static_cast<int>(r.spec.index) &&
                             !l.backlog.empty() && l.backlog.front().started;
    if (r.owe_probe_ack && !mid_message && PostBare(l, r, link_wire::MsgType::kRailProbeAck))
      r.owe_probe_ack = false;
    if (!r.probed && now >= r.probe_deadline) {
      r.Fail(Code::kLinkDown, "probe: no answer over the rail within " +
                                  std::to_string(options_.rail_probe_ms) +
                                  " ms (the pair does not reach)");
    }
  }
}

bool Engine::OnRailProbe(EngineLink& l, Rail& r, const link_wire::Header& h) {
  if (h.type == link_wire::MsgType::kRailProbe) {
    r.owe_probe_ack = true;
    ProgressProbes(l, Clock::now());
    return true;
  }
  if (h.type == link_wire::MsgType::kRailProbeAck) {
    if (!r.probed) {
      r.probed = true;
      r.up_since = Clock::now();
      r.probe_rtt_us =
          std::chrono::duration<double, std::micro>(Clock::now() - r.probe_sent).count();
      spdlog::get("engine")->info("link {} to '{}': rail {} up ({} > {})", l.id, l.spec.peer,
                                  r.spec.index, r.spec.local, r.spec.remote);
    }
    return true;
  }
  return false;
}

void Engine::TakeRailDown(uint64_t link_id, uint32_t index, const std::string& why) {
  EngineLink* l = FindLink(link_id);
  if (l == nullptr) return;
  Rail* r = l->rail(index);
  if (r == nullptr || !r->live()) return;
  r->Fail(Code::kLinkDown, why);
  link_pending_.store(true);
}

size_t Engine::TakeStalledRailsDown(std::chrono::milliseconds stalled_after) {
  size_t n = 0;
  const Clock::time_point now = Clock::now();
  for (auto& [id, lp] : links_) {
    EngineLink& l = *lp;
    for (auto& r : l.rails) {
      if (r == nullptr || !r->up() || (r->transfers == 0 && r->sends_in_flight() == 0)) continue;
      if (now - r->last_progress < stalled_after) continue;
      if (!l.other_than(*r)) continue;  // the link's heartbeats judge its last rail
      r->Fail(Code::kLinkDown,
              "no completion for " +
                  std::to_string(
                      std::chrono::duration_cast<std::chrono::milliseconds>(now - r->last_progress)
                          .count()) +
                  " ms with work posted");
      ++n;
    }
  }
  if (n > 0) link_pending_.store(true);
  return n;
}

void Engine::DropFailedRails(EngineLink& l) {
  for (size_t i = 0; i < l.rails.size() && !l.failed; ++i) {
    Rail* r = l.rails[i].get();
    if (r == nullptr || !r->failed || r->conn == nullptr) continue;
    if (!l.other_than(*r)) {
      // The last rail: the link is down, as a link of one connection is.
      FailLink(l, r->fail_code, r->fail_reason);
      return;
    }
    const bool never_up = !r->probed;
    RetireRail(l, *r);
    if (on_rail_down_) on_rail_down_(l.id, r->spec.index, r->last_error, never_up);
  }
}

void Engine::RetireRail(EngineLink& l, Rail& r) {
  const uint32_t i = r.spec.index;
  const bool messages_here = l.message_rail == static_cast<int>(i);
  r.conn->Abandon();
  uint64_t reissued = transfers_.RailGone(l.id, i);
  r.stats.slices_reissued += reissued;
  uint64_t resent = 0;
  if (r.carried_messages) {
    // What it carried may be lost: everything unacknowledged goes again,
    // after a message another rail is in the middle of.
    auto at = l.backlog.begin();
    if (at != l.backlog.end() && at->started) {
      if (messages_here) {
        at->sent = 0;
        at->started = false;
      } else {
        ++at;
      }
    }
    resent = l.unacked.size();
    l.resent += resent;
    std::vector<EngineLink::Outgoing> again;
    again.reserve(l.unacked.size());
    for (auto& [seq, m] : l.unacked) {
      l.backlog_bytes += m.payload.size();
      again.push_back(std::move(m));
    }
    l.backlog.insert(at, std::make_move_iterator(again.begin()),
                     std::make_move_iterator(again.end()));
    l.unacked.clear();
    l.unacked_bytes = 0;
    for (auto& other : l.rails)
      if (other != nullptr) other->carried_messages = false;
  }
  if (messages_here) l.message_rail = -1;
  spdlog::get("engine")->warn(
      "link {} to '{}': rail {} down ({}); {} slices reissued, {} messages sent again", l.id,
      l.spec.peer, i, r.fail_reason, reissued, resent);
  ++r.stats.downs;
  r.last_error = r.fail_reason;
  r.free_send.clear();
  r.incoming = Reassembler{};
  r.transfers = 0;
  r.inflight_bytes = 0;
  r.rate_bps = 0;
  r.window_bytes = 0;
  r.conn.reset();
  r.region.reset();
  r.memory.reset();
  r.failed = false;
  r.owe_probe_ack = false;
}

Rail* Engine::MessageRail(EngineLink& l) {
  if (l.message_rail >= 0) {
    Rail* cur = l.rail(static_cast<uint32_t>(l.message_rail));
    // A message in the middle of its fragments finishes where it started.
    if (cur != nullptr && cur->up() && !l.backlog.empty() && l.backlog.front().started) return cur;
  }
  // The lowest-latency rail: RDMA before tcp, then the shorter probe
  // round trip, then the lower index (so both ends and every call agree
  // while nothing changes).
  auto faster = [](const Rail& a, const Rail& b) {
    bool a_tcp = a.spec.transport != Transport::kVerbs;
    bool b_tcp = b.spec.transport != Transport::kVerbs;
    if (a_tcp != b_tcp) return !a_tcp;
    if (a.probe_rtt_us != b.probe_rtt_us) return a.probe_rtt_us < b.probe_rtt_us;
    return a.spec.index < b.spec.index;
  };
  Rail* best = nullptr;
  for (size_t i = 1; i < l.rails.size(); ++i) {
    Rail* r = l.rails[i].get();
    if (r != nullptr && r->up() && (best == nullptr || faster(*r, *best))) best = r;
  }
  if (best == nullptr && !l.rails.empty() && l.rails[0] != nullptr && l.rails[0]->up())
    best = l.rails[0].get();
  if (best == nullptr) return nullptr;
  l.message_rail = static_cast<int>(best->spec.index);
  best->carried_messages = true;
  return best;
}

Rail* Engine::PickRail(EngineLink& l, const TransferOp& op, uint64_t bytes) {
  // A rail can carry the op when its device has the local buffer
  // registered and the peer granted the export to the device at its end.
  auto can = [&](const Rail& r) {
    return r.up() && !op.local->regs[r.spec.slot].empty() &&
           (!op.peer || op.peer->KeysFor(r.spec.peer_device) != nullptr);
  };
  bool other = false;
  for (size_t i = 1; i < l.rails.size() && !other; ++i)
    other = l.rails[i] != nullptr && can(*l.rails[i]);
  auto eligible = [&](const Rail& r) { return can(r) && (r.spec.index != 0 || !other); };
  uint32_t stripers = 0;
  for (const auto& r : l.rails) stripers += r != nullptr && eligible(*r) ? 1 : 0;
  auto room = [&](const Rail& r) {
    uint64_t most = std::max(kMinRailInflightBytes, kRailInflightSlices * options_.slice_bytes);
    // The rail that carries calls keeps its queue short while others can
    // take the bulk: a call waits behind at most two slices, not a rail's
    // whole share of a transfer.
    if (stripers > 1 && static_cast<int>(r.spec.index) == l.message_rail)
      most = kMessageRailSlices * options_.slice_bytes;
    return r.transfers + r.sends_in_flight() < r.conn->caps().max_outstanding &&
           (r.inflight_bytes == 0 || r.inflight_bytes + bytes <= most);
  };
  // Small transfers stay on one rail, the messages' when it fits.
  if (op.length < options_.stripe_min_bytes) {
    if (!op.pieces.empty()) {
      Rail* r = l.rail(op.pieces.front().rail);
      if (r != nullptr && eligible(*r)) return room(*r) ? r : nullptr;
    }
    Rail* m = l.message_rail >= 0 ? l.rail(static_cast<uint32_t>(l.message_rail)) : nullptr;
    if (m != nullptr && eligible(*m)) return room(*m) ? m : nullptr;
  }
  double best_rate = 0;
  for (const auto& r : l.rails)
    if (r != nullptr && eligible(*r)) best_rate = std::max(best_rate, r->rate_bps);
  Rail* pick = nullptr;
  double pick_cost = 0;
  const Clock::time_point now = Clock::now();
  for (const auto& rp : l.rails) {
    if (rp == nullptr || !eligible(*rp)) continue;
    Rail& r = *rp;
    // Far slower than the best: left out while the best is up, until its
    // estimate is stale (kRateStaleAfter).
    if (r.rate_bps > 0 && best_rate > 0 &&
        r.rate_bps * 100 < best_rate * static_cast<double>(options_.rail_min_share) &&
        now - r.rate_at < kRateStaleAfter)
      continue;
    if (!room(r)) continue;
    double rate = r.rate_bps > 0 ? r.rate_bps : (best_rate > 0 ? best_rate : 1.0);
    double cost = static_cast<double>(r.inflight_bytes + bytes) / rate;
    if (pick == nullptr || cost < pick_cost) {
      pick = &r;
      pick_cost = cost;
    }
  }
  return pick;
}

void NoteRailBusy(Rail& r) {
  if (r.transfers == 0 && r.sends_in_flight() == 0) r.last_progress = Clock::now();
  if (r.inflight_bytes == 0 && r.window_bytes == 0) r.window_start = Clock::now();
}

void NoteSliceDone(Rail& r, uint64_t bytes) {
  r.window_bytes += bytes;
  Clock::time_point now = Clock::now();
  double secs = std::chrono::duration<double>(now - r.window_start).count();
  // A window closes after 20 ms, or when the rail runs dry (then it may
  // be shorter, but not a burst of completions reaped at once).
  if (secs < kRateWindowSeconds && (r.inflight_bytes != 0 || secs < kRateMinSeconds)) return;
  double sample = static_cast<double>(r.window_bytes) / secs;
  const bool stale = now - r.rate_at >= kRateStaleAfter;
  r.rate_bps =
      r.rate_bps == 0 || stale ? sample : (1 - kRateWeight) * r.rate_bps + kRateWeight * sample;
  r.rate_at = now;
  r.window_start = now;
  r.window_bytes = 0;
}

std::vector<RailSnapshot> Engine::RailSnapshots(const EngineLink& l) const {
  std::vector<RailSnapshot> out;
  uint64_t striped = 0;
  for (const auto& r : l.rails)
    if (r != nullptr) striped += r->striped_bytes;
  const bool other = l.has_other_rail();
  for (const auto& r : l.rails) {
    if (r == nullptr) continue;
    RailSnapshot s;
    s.index = r->spec.index;
    s.local = r->spec.local;
    s.remote = r->spec.remote;
    s.transport = r->spec.transport;
    s.profile = r->spec.profile;
    s.device = r->spec.device;
    s.port = r->spec.port;
    s.peer_device = r->spec.peer_device;
    s.up = r->up();
    s.probing = r->live() && !r->probed;
    s.probe_rtt_us = r->probe_rtt_us;
    if (s.up) {
      s.up_for_ms = static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - r->up_since)
              .count());
    }
    s.last_resort = r->spec.index == 0 && other;
    s.messages = s.up && l.message_rail == static_cast<int>(r->spec.index);
    s.inflight_bytes = r->inflight_bytes;
    s.rate_bps = r->rate_bps;
    s.share =
        striped == 0 ? 0 : static_cast<double>(r->striped_bytes) / static_cast<double>(striped);
    s.last_error = r->last_error;
    s.stats = r->stats;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace mcdma::daemon
