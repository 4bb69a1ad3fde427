// The daemon's RDMA device: opened at start when this build has the verbs
// transport (libibverbs was found) and the host a usable device; otherwise
// why not, for `mcdmactl links` and for links with transport "auto".
#pragma once

#include <memory>

#include "config/options.hpp"
#include "driver/transport.hpp"
#include "engine/link.hpp"

namespace mcdma::daemon {

struct VerbsOpened {
  std::unique_ptr<driver::Device> device;  // null when not available
  LocalVerbsInfo info;
};

VerbsOpened OpenVerbs(const Options& options);

}  // namespace mcdma::daemon
