// The fabric commands of mcdmactl (admin.proto, "The fabric"):
//
//   mcdmactl fabric [--json]    membership source and store state, then one
//                               row per host: state, boot generation, how
//                               this host reaches it, the link's state, its
//                               addresses and the links its record lists
//   mcdmactl fabric graph       the fabric as Graphviz DOT: hosts, and an
//                               edge per link that both ends' records list
//                               up (`| dot -Tsvg > fabric.svg` draws it)
//
// A daemon without fabric.store or fabric.file says so ("no fabric ...")
// and exits 0. Exit codes as for every mcdmactl command (cli.hpp).
#pragma once

#include <CLI/CLI.hpp>
#include <ostream>

#include "command.hpp"
#include "mcdma/status.hpp"
#include "mcdma/v1/admin.pb.h"
#include "render.hpp"

namespace mcdma::tools {

void AddFabricCommands(CLI::App& app, bool& json, Action& chosen);

// Exposed for tests.
Status RenderFabric(const v1::FabricReply& reply, OutputFormat format, std::ostream& out);
Status RenderFabricGraph(const v1::FabricReply& reply, std::ostream& out);

}  // namespace mcdma::tools
