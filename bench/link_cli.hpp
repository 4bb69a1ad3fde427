// What the command lines of mcdma_bench_link and mcdma_bench_verbs share:
// the hidden `child` subcommand that makes the binary one endpoint process,
// its dispatch to a role, and binaries found next to this one.
//
// Threading: called from main only.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <string>

#include "link_roles.hpp"

namespace bench {

using LinkRoleFn = int (*)(const LinkRoleOptions&);

// The `child` subcommand (hidden from --help: the orchestrator starts it)
// with every endpoint option bound to `role`.
CLI::App* AddLinkChild(CLI::App& app, LinkRoleOptions& role);
// The roles every link benchmark runs: the daemon call and bulk endpoints.
std::map<std::string, LinkRoleFn> DaemonRoles();
// Runs `role.role` from `roles`; 2 (usage) for an unknown one.
int RunLinkRole(LinkRoleOptions& role, const char* program,
                const std::map<std::string, LinkRoleFn>& roles);

}  // namespace bench
