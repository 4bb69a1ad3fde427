// The static fabric file: the same file on every host, for fabrics without
// a membership store.
//
//   [[host]]
//   id = "mac-1"
//   addresses = ["10.20.1.1:7471", "10.20.2.1:7471"]   # its Peer service,
//                                                      # one per cable
//   [[cable]]
//   hosts = ["mac-1", "mac-2"]
//
// Every host listed is a member. Without [[cable]] tables a host links to
// every member one of whose addresses is on a subnet of its fabric
// interfaces; with them, only to the hosts it is cabled to (the address
// dialed is the peer's on a shared subnet, else its first).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "mcdma/status.hpp"
#include "mcdma/v1/peer.pb.h"

namespace mcdma::daemon::fabric {

inline constexpr size_t kMaxCables = 4096;

struct FabricFile {
  std::vector<v1::FabricHostRecord> hosts;                  // host and addresses only
  std::vector<std::pair<std::string, std::string>> cables;  // each pair sorted
};

// Reads and checks the file: INVALID_ARGUMENT naming the table and field
// at fault (a host listed twice, a cable to an unknown host, ...).
Result<FabricFile> LoadFabricFile(const std::string& path);
Result<FabricFile> ParseFabricFile(const std::string& text, const std::string& source);

}  // namespace mcdma::daemon::fabric
