#include "link_orchestrator.hpp"

#include "harness/endpoint.hpp"
#include "harness/pair_runner.hpp"

namespace mcdma::bench {

namespace {

// Servers outlive the client run they serve by this much before their own
// idle limit ends them (the orchestrator normally stops them long before).
constexpr int kServerSlackMs = 60000;

// This binary's `child` command line for `role`, with the bulk options.
std::vector<std::string> EndpointArgv(const LinkPlan& plan, const std::string& role,
                                      int run_limit_ms) {
  std::vector<std::string> argv =
      harness::EndpointArgv({plan.self_exe, "child"}, harness::RoleFor(plan, role, run_limit_ms));
  argv.insert(argv.end(),
              {"--bulk-bytes", std::to_string(plan.bulk_bytes), "--op-bytes",
               std::to_string(plan.op_bytes), "--repeats", std::to_string(plan.repeats)});
  return argv;
}

}  // namespace

Result<std::vector<harness::SampleSet>> RunLinkPair(const LinkPlan& plan,
                                                    const harness::Hosts& hosts,
                                                    const harness::TempDir& dir, LinkPair pair) {
  const harness::Host& a = hosts[0];
  const harness::Host& b = hosts[1];
  harness::PairRun run;
  run.program = plan.program;
  run.key = pair.key;
  run.server_role = pair.server_role;
  run.client_role = pair.client_role;
  // The server on host B, listening on B's address; the client on host A.
  run.server_argv =
      hosts.On(b, EndpointArgv(plan, pair.server_role, plan.run_limit_ms + kServerSlackMs));
  run.server_argv.insert(run.server_argv.end(), {"--address", b.address});
  run.server_argv.insert(run.server_argv.end(), pair.server_args.begin(), pair.server_args.end());
  run.server_host = b.id;
  run.server_address = b.address;
  run.client_argv = hosts.On(a, EndpointArgv(plan, pair.client_role, plan.run_limit_ms));
  run.client_argv.insert(run.client_argv.end(), pair.client_args.begin(), pair.client_args.end());
  run.client_host = a.id;
  run.ready_timeout = pair.ready_timeout;
  run.run_limit = harness::Millis(plan.run_limit_ms);
  run.expect_sets = pair.expect_sets;
  run.expect_samples = pair.expect_samples;
  return harness::RunPair(dir, std::move(run));
}

}  // namespace mcdma::bench
