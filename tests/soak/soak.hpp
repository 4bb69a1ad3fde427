// mcdma_soak: hours of mixed traffic between apps on two hosts while apps
// are killed and the wire is cut (scripts/soak.sh). One binary, two modes:
//   mcdma_soak run --minutes M [--seed N]   the driver (soak_driver.cpp):
//       two network namespaces, a daemon in each, 8 apps, the chaos, the
//       checks and the summary; exit 0 pass, 1 fail, 77 cannot run here
//   mcdma_soak app --socket S --index I --hosts H0,H1,...   one app
//       (soak_app.cpp), started by the driver inside its host's namespace
#pragma once

#include "harness/role_main.hpp"

namespace mcdma::soak {

// "--key value" pairs after the mode (harness/role_main.hpp).
using harness::Args;
using harness::SplitList;

int RunApp(const Args& args);
int RunDriver(const Args& args);

}  // namespace mcdma::soak
