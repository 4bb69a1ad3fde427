// The app sessions the engine serves, and what is left of the ones it
// reaped (their counters, for status).
//
// Owner: the Engine, which holds one SessionTable; engine thread only.
// Reaping a session touches every component (its calls, exports, buffers,
// transfers): the engine does that (Engine::CloseSession) and then hands
// the session back here with Reap. Invariants: ids are unique; a reaped
// session's ring faults keep counting in ring_faults().
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "engine/session.hpp"

namespace mcdma::daemon {

class SessionTable {
 public:
  using Map = std::map<uint64_t, std::unique_ptr<Session>>;

  void Add(std::unique_ptr<Session> s);
  Session* Find(uint64_t id);
  const Session* Find(uint64_t id) const;
  // Removes a session whose resources the engine has reclaimed.
  void Reap(uint64_t id);
  std::vector<uint64_t> Ids() const;

  size_t size() const { return sessions_.size(); }
  uint64_t reaped() const { return reaped_; }
  // Ring faults of every session, live or reaped.
  uint64_t ring_faults() const;

  Map::iterator begin() { return sessions_.begin(); }
  Map::iterator end() { return sessions_.end(); }
  Map::const_iterator begin() const { return sessions_.begin(); }
  Map::const_iterator end() const { return sessions_.end(); }

 private:
  Map sessions_;
  uint64_t reaped_ = 0;
  uint64_t reaped_ring_faults_ = 0;
};

}  // namespace mcdma::daemon
