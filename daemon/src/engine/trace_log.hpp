// Traced calls: the times of each stage of a call an app asked to have
// traced (ClientOptions::trace_calls, MCDMA_TRACE_CALLS=1: shm::kFlagTrace
// on its CALL submissions), for `mcdmactl trace` (Admin.Trace).
//
// A traced call to a peer's service is timed on both hosts. The caller's
// engine keeps its times in the PendingCall (CallTrace) and asks the peer
// to time its part (link_wire::kTraceBit on the kCall); the peer's engine
// answers with two durations on the kReply (docs/protocol.md, "Traced
// calls"). Clocks of two hosts are never compared: only durations cross.
// Untraced calls cost one flag test; nothing is recorded for them.
//
// Owner: the Engine; engine thread only. Bounded: the newest kCapacity
// records are kept.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "mcdma/status.hpp"

namespace mcdma::daemon {

// Nanoseconds of the steady clock (CLOCK_MONOTONIC on Linux: one clock for
// every process of a host, so an app's stamp and the engine's compare).
inline uint64_t SteadyNs(std::chrono::steady_clock::time_point t) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
}

// One record: a traced call that got its answer. Times are this host's
// steady-clock ns; 0 where a stage did not happen (a call refused before it
// was posted; a peer that did not time its part).
struct TraceRecord {
  uint64_t session = 0;  // the calling app's session
  std::string peer;      // the host whose service answered
  std::string transport;
  uint64_t request_bytes = 0;
  uint64_t reply_bytes = 0;
  Code code = Code::kOk;
  uint64_t submit_ns = 0;     // the app's stamp, as it wrote the submission
  uint64_t pickup_ns = 0;     // the engine took the submission
  uint64_t posted_ns = 0;     // the call's message was wholly posted on a rail
  uint64_t reply_ns = 0;      // the reply was received whole
  uint64_t completed_ns = 0;  // the completion was in the app's ring
  // Durations the peer's daemon measured (remote_timed): from the call
  // received whole to the reply about to be posted, and the part of it the
  // serving app had the call (in its inbox until its REPLY was taken).
  bool remote_timed = false;
  uint64_t remote_ns = 0;
  uint64_t remote_app_ns = 0;
};

class TraceLog {
 public:
  static constexpr size_t kCapacity = 4096;
  void Add(TraceRecord r);
  // The newest `max` records (all if 0) of `session` (every session if 0),
  // oldest first.
  std::vector<TraceRecord> Snapshot(uint64_t session, size_t max) const;
  void Clear() { records_.clear(); }
  uint64_t recorded() const { return recorded_; }  // ever, including those since dropped

 private:
  std::deque<TraceRecord> records_;
  uint64_t recorded_ = 0;
};

}  // namespace mcdma::daemon
