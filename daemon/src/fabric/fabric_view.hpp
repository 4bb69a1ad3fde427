// Which members this host reaches directly and which of them it dials: a
// pure function of the member records, this host's fabric interfaces and,
// for a fabric file with [[cable]] tables, the cables. Every host computes
// the same answer for a pair, so exactly one end dials (the lower id).
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "fabric/local_networks.hpp"
#include "mcdma/v1/peer.pb.h"

namespace mcdma::daemon::fabric {

struct Reach {
  bool direct = false;
  std::string address;  // the peer's address to dial (direct only)
  std::string detail;   // why not direct, or which interface
  bool dials = false;   // direct and this host's id is the lower
};

using Cables = std::set<std::pair<std::string, std::string>>;  // each pair sorted

// `cables` null: reach by subnet only (a store, or a file without cables).
Reach ReachOf(const std::string& self, const v1::FabricHostRecord& peer,
              const std::vector<LocalNet>& nets, const Cables* cables);

}  // namespace mcdma::daemon::fabric
