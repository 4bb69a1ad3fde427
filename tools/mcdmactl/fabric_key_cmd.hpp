// `mcdmactl fabric-key new PATH [--force] [--json]`: writes a fresh fabric
// key (see common/include/mcdma_auth/fabric_key.hpp for the file format
// and the checks the daemon applies) and prints where it went and its
// fingerprint. Runs locally: it never talks to the daemon.
//
// Output: text "wrote fabric key PATH (fingerprint 1a2b3c4d)", or with --json
// one object {"path": "...", "fingerprint": "..."}. The key
// itself is never printed.
// Exit codes as for every mcdmactl command (cli.hpp): 0 written, 1 refused
// or failed (file exists without --force, directory missing, I/O error),
// 2 usage.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <ostream>
#include <string>

namespace mcdma::tools {

// A subcommand that runs without the daemon; returns the exit code.
using LocalCommand = std::function<int(std::ostream& out, std::ostream& err)>;

// Adds `fabric-key` (with its `new` subcommand) to `app`; parsing it makes
// `chosen` the command to run. `chosen` must outlive parsing.
void AddFabricKeyCommands(CLI::App& app, LocalCommand& chosen);

// What `fabric-key new` does once parsed (exposed for tests).
int NewFabricKeyCommand(const std::string& path, bool force, bool json, std::ostream& out,
                        std::ostream& err);

}  // namespace mcdma::tools
