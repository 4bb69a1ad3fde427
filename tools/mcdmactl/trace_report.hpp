// `mcdmactl trace`: where the microseconds of a call to another host go.
// The stage breakdown of traced calls (the daemon's records, Admin.Trace,
// plus when the calling app saw each completion), as a table or JSON.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "mcdma/v1/admin.pb.h"

namespace mcdma::tools {

// The stages, in the order a call passes them. Each is a duration per
// call; one that a record cannot tell (a peer that did not time its part,
// a call never posted) is left out of that stage's figures.
struct TraceStage {
  std::string name;
  std::string what;
  std::vector<uint64_t> samples_ns;
};

struct TraceBreakdown {
  std::string host;
  std::string peer;
  std::string service;
  std::string transport;  // of the records (the last one's)
  uint64_t request_bytes = 0;
  uint64_t calls = 0;
  std::vector<TraceStage> stages;  // the last is "total"
};

// `calls` oldest first; `seen_ns[i]`: when the app saw calls[i]'s
// completion (steady clock ns of this host), or empty when unknown (the
// last stage is then left out).
TraceBreakdown BreakDown(const std::vector<v1::TraceCall>& calls,
                         const std::vector<uint64_t>& seen_ns);

void RenderTraceText(const TraceBreakdown& b, std::ostream& out);
void RenderTraceJson(const TraceBreakdown& b, std::ostream& out);
// CSV: stage,index,ns (a header line first).
void WriteTraceRaw(const TraceBreakdown& b, std::ostream& out);

}  // namespace mcdma::tools
