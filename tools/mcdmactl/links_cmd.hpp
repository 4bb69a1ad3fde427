// The link commands of mcdmactl (admin.proto, "Links to peer hosts"):
//
//   mcdmactl links [--json]                  the daemon's links (alias: link list)
//   mcdmactl link list [--json]
//   mcdmactl link add PEER ADDRESS [--transport auto|tcp|verbs]
//   mcdmactl link remove PEER
//   mcdmactl link test PEER [--bytes N] [--count N] [--json]
//
// Output: link_render.hpp. `link add` prints "link to PEER added (ADDRESS,
// transport T)", `link remove` "link to PEER removed". Exit codes as for every
// mcdmactl command (cli.hpp); a daemon's refusal (ALREADY_EXISTS, NOT_FOUND,
// FAILED_PRECONDITION when peering is off, LINK_DOWN, ...) is exit 1 with its
// "CODE_NAME: message".
#pragma once

#include <CLI/CLI.hpp>

#include "command.hpp"

namespace mcdma::tools {

// Adds `links` and `link` (with list/add/remove/test) to `app`. Their --json
// flags set `json`; parsing one of them makes `chosen` its action. Both must
// outlive parsing and the action.
void AddLinkCommands(CLI::App& app, bool& json, Action& chosen);

}  // namespace mcdma::tools
