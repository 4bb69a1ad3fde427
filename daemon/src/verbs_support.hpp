// The daemon's RDMA device ports: opened at start when this build has the
// verbs transport (libibverbs was found) and the host usable devices —
// those [[rdma]] lists, or verbs.device, or every ACTIVE port — each a
// verbs rail of every link (docs/architecture.md §21); otherwise why not,
// for `mcdmactl links` and for links with transport "auto". And what a
// port is doing now, for the rail watch and status displays.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/options.hpp"
#include "driver/transport.hpp"
#include "engine/engine.hpp"

namespace mcdma::daemon {

struct VerbsOpened {
  std::vector<Engine::RdmaPort> ports;  // empty when none could be opened
  std::string reason;                   // why none (or why some were left out)
};

VerbsOpened OpenVerbs(const Options& options);

// What an RDMA port is doing now. Thread-safe.
struct RdmaPortState {
  bool active = false;
  std::string failure;  // why not active
  uint32_t queue_pairs = 0;
  uint32_t registrations = 0;
};
RdmaPortState StateOfRdmaPort(const driver::Device* device);

}  // namespace mcdma::daemon
