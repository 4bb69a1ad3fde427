#include "link_cli.hpp"

#include <cstdio>

#include "harness/daemon_echo.hpp"

namespace mcdma::bench {

CLI::App* AddLinkChild(CLI::App& app, LinkRoleOptions& role) {
  CLI::App* child = harness::AddChildCommand(app, role);
  child->add_option("--address", role.address);
  child->add_option("--peer", role.peer);
  child->add_option("--bulk-bytes", role.bulk_bytes);
  child->add_option("--op-bytes", role.op_bytes);
  child->add_option("--repeats", role.repeats);
  child->add_option("--rails", role.rails)->delimiter(',');
  child->add_option("--marker", role.marker);
  return child;
}

std::map<std::string, LinkRoleFn> DaemonRoles() {
  return {
      {"daemon-server", [](const LinkRoleOptions& o) { return harness::RunDaemonServer(o); }},
      {"daemon-call-client", RunDaemonCallClient},
      {"daemon-bulk-server", RunDaemonBulkServer},
      {"daemon-bulk-client", RunDaemonBulkClient},
  };
}

int RunLinkRole(LinkRoleOptions& role, const char* program,
                const std::map<std::string, LinkRoleFn>& roles) {
  auto it = roles.find(role.role);
  if (it == roles.end()) {
    fprintf(stderr, "%s: unknown role '%s'\n", program, role.role.c_str());
    return 2;
  }
  role.program = program;
  return it->second(role);
}

}  // namespace mcdma::bench
