#include "engine/trace_log.hpp"

#include <algorithm>

namespace mcdma::daemon {

void TraceLog::Add(TraceRecord r) {
  if (records_.size() >= kCapacity) records_.pop_front();
  records_.push_back(std::move(r));
  ++recorded_;
}

std::vector<TraceRecord> TraceLog::Snapshot(uint64_t session, size_t max) const {
  std::vector<TraceRecord> out;
  for (auto it = records_.rbegin(); it != records_.rend(); ++it) {
    if (max != 0 && out.size() >= max) break;
    if (session == 0 || it->session == session) out.push_back(*it);
  }
  std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace mcdma::daemon
