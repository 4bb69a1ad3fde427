// Which transport a link uses, and why (shown in `mcdmactl links`), and the
// verbs path two ends agreed on. Pure functions of what both ends said in
// Hello and Connect: unit-tested without devices.
#pragma once

#include <string>

#include "engine/link.hpp"
#include "mcdma/status.hpp"
#include "mcdma/v1/admin.pb.h"

namespace mcdma::daemon {

struct TransportChoice {
  Transport transport = Transport::kTcp;  // kTcp or kVerbs
  std::string reason;
};

// What one end offers for verbs: nothing (no usable device), or a device
// running `profile`.
struct VerbsOffer {
  bool offered = false;
  std::string profile;
};

// `requested`: "auto", "tcp" or "verbs" (the link's config). A "verbs" that
// cannot be had is an error (kInvalid, a refusal) naming what is missing.
// "auto" runs the link itself on tcp, the rail of last resort, and leaves
// RDMA to the verbs rails (docs/architecture.md §21): saying which RDMA
// rails may come, or why none. Profiles whose QP types differ (apple-tb5
// is UC, the others RC) cannot link over verbs.
Result<TransportChoice> ChooseTransport(const std::string& requested, const std::string& peer,
                                        const LocalVerbsInfo& local, const VerbsOffer& remote,
                                        bool peer_offers_tcp);

// A raw 16-byte GID as sysfs spells it (8 groups of 4 hex digits); "" for
// another length.
std::string GidText(const std::string& raw);

// The status view of a verbs link from both ends' endpoint descriptions
// (driver/verbs/verbs_wire.hpp); kInvalid if either does not decode.
Result<v1::VerbsPath> DescribeVerbsPath(const LocalVerbsInfo& local, const std::string& local_info,
                                        const std::string& remote_info);

}  // namespace mcdma::daemon
