// Rendering of the link replies (admin.proto, "Links to peer hosts") for
// `mcdmactl links` and `mcdmactl link test`; same conventions as render.hpp.
//
// `links --json` is the LinksReply in render.hpp's JSON form. `link test
// --json` is one object: the LinkTestRequest and LinkTestReply in that form,
// merged, plus the computed statistics:
//   {"peer":"b","bytes":64,"count":10,"transport":"tcp","generation":"3",
//    "rtt_us":[...],"min_us":11.5,"p50_us":12,"max_us":20.25}
// so a script may also parse it as either message, ignoring unknown keys.
//
// Failure: as render.hpp (kInternal if protobuf cannot serialize); nothing
// throws. Replies are untrusted input: odd strings and numbers are printed
// harmlessly, never trusted for indexing.
#pragma once

#include <ostream>
#include <vector>

#include "mcdma/status.hpp"
#include "mcdma/v1/admin.pb.h"
#include "render.hpp"

namespace mcdma::tools {

// Round-trip statistics of a link test, microseconds. p50 is the nearest-rank
// median (the lower middle value of an even count). All zero for no samples;
// a sample that is not a finite number >= 0 counts as 0.
struct RttStats {
  double min_us = 0;
  double p50_us = 0;
  double max_us = 0;
};
RttStats ComputeRttStats(std::vector<double> rtt_us);

// Text: a "host ID, peering on (listen ADDR)" line (with how to turn peering
// on when it is off), then one table row per link, each followed by one
// indented line per rail of the link (none while the link's own connection
// is its only rail): index, name, state, role, throughput, share, bytes,
// in flight, reissued slices, downs, last error; aligned across links.
Status RenderLinks(const v1::LinksReply& reply, OutputFormat format, std::ostream& out);

// Text: one line per round trip, then "PEER via TRANSPORT gen G: N round
// trips of B bytes verified; min/p50/max X/Y/Z us".
Status RenderLinkTest(const v1::LinkTestRequest& request, const v1::LinkTestReply& reply,
                      OutputFormat format, std::ostream& out);

}  // namespace mcdma::tools
