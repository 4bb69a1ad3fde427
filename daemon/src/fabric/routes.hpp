// Routes over the fabric's graph: hosts as nodes, and an edge for every
// link both ends' records list up. Every daemon computes its routes from
// the same records with the same rule, so the hops of a route agree with
// what each relay on it computes for the rest of the way.
//
// Cost of a path: the sum over its links of the link's round trip as the
// records publish it (the lowest heartbeat round trip of the link, averaged
// over both ends; 1 ms when neither says) plus 100 us per hop; ties go to
// fewer hops, then to the lexicographically smaller list of hosts. Paths
// longer than kMaxRouteHops links are not routes. A record is published
// again when its links change or a link's lowest round trip fell under
// half the published one, never for load: routes do not flap under it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "mcdma/v1/peer.pb.h"

namespace mcdma::daemon::fabric {

inline constexpr size_t kMaxRouteHops = 4;

struct RouteEntry {
  std::string next_hop;           // the first host after this one
  std::vector<std::string> hops;  // every host after this one, the destination last
  double cost_us = 0;
  std::string instance;  // the destination daemon's, from its record
};

// `records`: every member but this host (evicted ones left out); `self`
// this host's own record (its links as they are now). Returns a route to
// every member the graph reaches, direct neighbours included (one hop).
std::map<std::string, RouteEntry> ComputeRoutes(
    const v1::FabricHostRecord& self, const std::map<std::string, v1::FabricHostRecord>& records);

}  // namespace mcdma::daemon::fabric
