// Rails of a link as both ends agree on them (docs/protocol.md §13.6): the
// rails each daemon announces in Hello, checked; the canonical order of the
// candidate pairs, computed identically from the two announcements by both
// ends; and the check of an AddRail request against it. Pure functions:
// unit-tested without devices.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/options.hpp"
#include "engine/link.hpp"
#include "mcdma/status.hpp"
#include "mcdma/v1/peer.pb.h"

namespace mcdma::daemon {

using RailOffer = google::protobuf::RepeatedPtrField<v1::PeerRail>;

// One candidate rail: a rail of the dialer and one of the callee of the
// same transport. `index` is its place in the canonical order, from 1
// (rail 0 is the link's own connection).
struct RailPair {
  uint32_t index = 0;
  v1::PeerRail dialer;
  v1::PeerRail callee;
};

// What this host announces: its RDMA device ports (verbs rails, in the
// order they were opened), then its configured tcp rails.
RailOffer OwnRails(const Options& options, const std::vector<LocalVerbsInfo>& rdma);

// A verbs endpoint description (driver/verbs/verbs_wire.hpp) must be the
// rail its sender announced: kInvalid, naming both, when its device, GID
// or profile is another (a peer that lies about its GIDs is refused before
// any queue pair of ours points at the address it gave), or when it does
// not decode.
Status CheckVerbsEndpoint(const std::string& info, const v1::PeerRail& announced,
                          const std::string& who);

// Whether QPs of two verbs profiles can talk (UC meets only UC).
bool ProfilesMeet(const std::string& a, const std::string& b);

// The most rails one daemon may announce, and candidate pairs per link.
inline constexpr int kMaxRailsOffered = 16;
inline constexpr size_t kMaxRailPairs = 64;

// kInvalid naming the first problem of `who`'s announcement: too many
// rails, an empty or repeated name, a transport other than "tcp" or
// "verbs", a tcp rail whose address is not an IP literal, a verbs rail
// without a device, a port, a known profile and a GID, or a device twice.
Status CheckRailOffer(const RailOffer& rails, const std::string& who);

// Every pair (d, c) with d.transport == c.transport (verbs: profiles that
// meet), ordered by (d.name, c.name), indexed from 1; at most kMaxRailPairs.
std::vector<RailPair> PlanRails(const RailOffer& dialer, const RailOffer& callee);

// The pair an AddRail names: kInvalid when `index` is not in the plan or
// names other rails than `dialer_rail` and `callee_rail` (a peer that
// reorders its rails or describes rails it did not announce).
Result<RailPair> FindRailPair(const std::vector<RailPair>& plan, uint32_t index,
                              const std::string& dialer_rail, const std::string& callee_rail);

}  // namespace mcdma::daemon
