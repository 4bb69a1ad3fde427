#include "child_cli.hpp"

namespace bench {

CLI::App* AddChildCommand(CLI::App& app, RoleOptions& role) {
  CLI::App* child = app.add_subcommand("child", "")->group("");
  child->add_option("--role", role.role)->required();
  child->add_option("--fd", role.fd);
  child->add_option("--ready-fd", role.ready_fd);
  child->add_option("--lifeline-fd", role.lifeline_fd);
  child->add_option("--socket", role.socket);
  child->add_option("--out", role.out);
  child->add_option("--payloads", role.payloads)->delimiter(',');
  child->add_option("--iterations", role.iterations);
  child->add_option("--warmup", role.warmup);
  child->add_option("--timeout-ms", role.timeout_ms);
  child->add_option("--run-limit-ms", role.run_limit_ms);
  return child;
}

}  // namespace bench
