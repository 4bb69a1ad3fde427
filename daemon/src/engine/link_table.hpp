// The engine's links to peer daemons, their counters and the echoes
// (mcdmactl link test) waiting on them.
//
// Owner: the Engine, which holds one LinkTable; engine thread only. The
// link manager (peer/link_manager.hpp) decides when links come and go; the
// engine installs and drops them here. Invariants: at most one link per
// (peer, origin); a link's `stats` points into this table's counters, which
// are never erased (a pair keeps its counters across generations); an echo
// names the link it was sent on and is answered or failed exactly once.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/link.hpp"

namespace mcdma::daemon {

class LinkTable {
 public:
  struct EchoWaiter {
    uint64_t link = 0;
    std::string payload;
    // The echoed bytes (or why none came) and the round trip as the engine
    // saw it, from handing the echo to the link to dispatching its answer.
    std::function<void(Result<std::string>, std::chrono::nanoseconds)> done;
    Clock::time_point sent = Clock::now();
  };

  // Takes over a link (its id set by the caller) and binds its counters.
  EngineLink& Add(std::unique_ptr<EngineLink> link);
  std::unique_ptr<EngineLink> Remove(uint64_t id);
  EngineLink* Find(uint64_t id);
  const EngineLink* Find(uint64_t id) const;
  // The installed link of (peer, origin), failed or not.
  EngineLink* Find(const LinkKey& key);
  // The link to carry traffic to `peer`: not failed, the one this host
  // dialed when there are two (either carries any traffic).
  EngineLink* To(const std::string& peer);
  std::vector<uint64_t> IdsTo(const std::string& peer) const;
  std::vector<uint64_t> Ids() const;

  // One snapshot per link, then one per (peer, origin) without a live link
  // (its counters only). `inflight` counts a link's operations.
  std::vector<LinkSnapshot> Snapshots(const std::function<uint32_t(uint64_t)>& inflight) const;

  void AddEcho(uint64_t seq, EchoWaiter waiter);
  std::optional<EchoWaiter> TakeEcho(uint64_t seq);
  // Takes the echoes sent on `link` (it is going down).
  std::vector<EchoWaiter> TakeEchoesOn(uint64_t link);

  bool empty() const { return links_.empty(); }
  std::map<uint64_t, std::unique_ptr<EngineLink>>::iterator begin() { return links_.begin(); }
  std::map<uint64_t, std::unique_ptr<EngineLink>>::iterator end() { return links_.end(); }

 private:
  std::map<uint64_t, std::unique_ptr<EngineLink>> links_;
  std::map<LinkKey, LinkStats> stats_;
  std::unordered_map<uint64_t, EchoWaiter> echoes_;
};

}  // namespace mcdma::daemon
