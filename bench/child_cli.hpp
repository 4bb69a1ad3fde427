// The hidden `child` subcommand every benchmark binary shares: the same
// binary re-executed by its orchestrator as one endpoint process (never by
// people, so it is left out of --help).
//
// Threading: called from main only.
#pragma once

#include <CLI/CLI.hpp>

#include "harness.hpp"

namespace bench {

// Adds `child` to `app` with every RoleOptions field as an option; the
// caller adds its own role-specific ones to the returned subcommand.
CLI::App* AddChildCommand(CLI::App& app, RoleOptions& role);

}  // namespace bench
