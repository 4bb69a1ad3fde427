// What the command lines of mcdma_bench_link and mcdma_bench_verbs share:
// the options their plans are made from, the hidden `child` subcommand
// that makes the binary one endpoint process, and its dispatch to a role.
//
// Threading: called from main only.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <map>
#include <string>

#include "harness/endpoint.hpp"
#include "link_roles.hpp"

namespace mcdma::bench {

using LinkRoleFn = int (*)(const LinkRoleOptions&);

// What a benchmark accepts for its bulk transfers.
struct BulkLimits {
  uint64_t min_bytes = 1;
  uint64_t max_bytes = uint64_t{16} << 30;
  uint64_t min_op_bytes = 1;
  int max_repeats = 1000;
};

// The options a LinkPlan is made from (PlanFrom, link_orchestrator.hpp):
// round trips, payloads, bulk sizes, the daemons and their flags,
// deadlines. Each benchmark's Options struct holds the defaults.
template <typename Options>
void AddPlanOptions(CLI::App& app, Options& o, const BulkLimits& bulk) {
  harness::AddRoundTripOptions(app, o.iterations, o.warmup, o.payloads);
  app.add_option("--bulk-bytes", o.bulk_bytes, "Bytes per bulk transfer (and buffer size)")
      ->check(CLI::Range(bulk.min_bytes, bulk.max_bytes));
  app.add_option("--bulk-op-bytes", o.op_bytes, "Bytes per piece of a daemon WriteBatch/ReadBatch")
      ->check(CLI::Range(bulk.min_op_bytes, bulk.max_bytes));
  app.add_option("--bulk-repeats", o.repeats,
                 "Timed bulk transfers per direction (after one untimed)")
      ->check(CLI::Range(1, bulk.max_repeats));
  app.add_option("--daemon", o.daemon,
                 "mcdma-rpcd binary (default: <bench dir>/../daemon/mcdma-rpcd)");
  app.add_option("--mcdmactl", o.mcdmactl,
                 "mcdmactl binary (default: <bench dir>/../tools/mcdmactl/mcdmactl)");
  app.add_option("--daemon-log-level", o.daemon_log_level, "The daemons' --log-level");
  app.add_option("--daemon-arg", o.daemon_args,
                 "One more flag for both daemons, e.g. --daemon-arg=--spin-budget-us=0 "
                 "(repeatable)")
      ->allow_extra_args(false);
  app.add_option("--timeout-ms", o.timeout_ms, "Deadline of one round trip")
      ->check(CLI::Range(1, 600000));
  app.add_option("--run-limit", o.run_limit_s, "Seconds one client run may take")
      ->check(CLI::Range(1, 86400));
  app.add_option("--link-wait", o.link_wait_s, "Seconds the daemons' link may take to come up")
      ->check(CLI::Range(1, 3600));
}

// The `child` subcommand (hidden from --help: the orchestrator starts it)
// with every endpoint option bound to `role`.
CLI::App* AddLinkChild(CLI::App& app, LinkRoleOptions& role);
// The roles every link benchmark runs: the daemon call and bulk endpoints.
std::map<std::string, LinkRoleFn> DaemonRoles();
// Runs `role.role` from `roles`; 2 (usage) for an unknown one.
int RunLinkRole(LinkRoleOptions& role, const char* program,
                const std::map<std::string, LinkRoleFn>& roles);

}  // namespace mcdma::bench
