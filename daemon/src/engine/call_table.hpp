// The calls awaiting their reply, and their deadlines.
//
// Owner: the Engine, which holds one CallTable; engine thread only. The
// table only books calls: delivering them and answering callers is the
// engine's (engine_calls.cpp). Invariants: every booked call has one entry
// in the deadline heap; the heap may also hold entries of calls already
// answered (skipped when they come up), so NextDeadline() may be early,
// never late.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <queue>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace mcdma::daemon {

using Clock = std::chrono::steady_clock;

// Who made a call, and so where its reply goes.
struct SessionCaller {  // an app session on this host
  uint64_t session = 0;
  uint64_t tag = 0;  // the app's tag for the completion
};
struct LinkCaller {  // a peer daemon, over a link
  uint64_t link = 0;
  uint64_t peer_call = 0;  // the peer's call id, echoed in the reply
};
using CallCaller = std::variant<SessionCaller, LinkCaller>;

// Who serves a call.
struct SessionServer {  // an app session on this host
  uint64_t session = 0;
  uint64_t service = 0;
};
struct LinkServer {  // a peer daemon, over a link
  uint64_t link = 0;
  uint64_t service = 0;  // the local id of the peer's service
  bool one_way = false;  // a NOTIFY awaiting the peer's ack
  uint64_t bytes = 0;    // a NOTIFY's payload length
};
using CallServer = std::variant<SessionServer, LinkServer>;

// A traced call's times so far (engine/trace_log.hpp), steady-clock ns of
// this host. The caller's host fills the first three, the server's host
// the last two.
struct CallTrace {
  uint64_t submit_ns = 0;
  uint64_t pickup_ns = 0;
  uint64_t posted_ns = 0;
  uint64_t received_ns = 0;   // the peer's call received whole here
  uint64_t delivered_ns = 0;  // and in the serving app's inbox
};

struct PendingCall {
  CallCaller caller;
  CallServer server;
  Clock::time_point deadline;
  Clock::time_point started = Clock::now();       // for the latency histogram
  std::optional<CallTrace> trace = std::nullopt;  // a traced call (shm::kFlagTrace)

  // The link either side is on; 0 for a call between two sessions here.
  uint64_t link() const {
    if (const auto* c = std::get_if<LinkCaller>(&caller)) return c->link;
    if (const auto* s = std::get_if<LinkServer>(&server)) return s->link;
    return 0;
  }
  bool one_way() const {
    const auto* s = std::get_if<LinkServer>(&server);
    return s != nullptr && s->one_way;
  }
  bool served_by_session(uint64_t session) const {
    const auto* s = std::get_if<SessionServer>(&server);
    return s != nullptr && s->session == session;
  }
  bool served_on_link(uint64_t link) const {
    const auto* s = std::get_if<LinkServer>(&server);
    return s != nullptr && s->link == link;
  }
  bool called_by_session(uint64_t session) const {
    const auto* c = std::get_if<SessionCaller>(&caller);
    return c != nullptr && c->session == session;
  }
};

class CallTable {
 public:
  // Books a call under `id` (unique: the engine's id counter).
  void Add(uint64_t id, const PendingCall& call);
  const PendingCall* Find(uint64_t id) const;
  PendingCall* FindMutable(uint64_t id);
  // Removes and returns the call; nullopt if it is not pending.
  std::optional<PendingCall> Take(uint64_t id);
  // Takes every call whose deadline is at or before `now`, earliest first.
  std::vector<std::pair<uint64_t, PendingCall>> TakeExpired(Clock::time_point now);
  // The earliest deadline booked (possibly of an answered call).
  std::optional<Clock::time_point> NextDeadline() const;

  // Ids of the calls with either side on `link`.
  std::vector<uint64_t> OnLink(uint64_t link) const;
  uint32_t CountOnLink(uint64_t link) const;
  // Ids of the calls `session` serves.
  std::vector<uint64_t> ServedBy(uint64_t session) const;
  // Forgets the calls `session` made (it is gone: nobody to tell).
  void DropCalledBy(uint64_t session);

  size_t size() const { return calls_.size(); }
  bool empty() const { return calls_.empty(); }

 private:
  std::unordered_map<uint64_t, PendingCall> calls_;
  std::priority_queue<std::pair<Clock::time_point, uint64_t>,
                      std::vector<std::pair<Clock::time_point, uint64_t>>, std::greater<>>
      deadlines_;
};

}  // namespace mcdma::daemon
