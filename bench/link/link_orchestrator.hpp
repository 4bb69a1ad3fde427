// mcdma_bench_link's orchestrator, shared with mcdma_bench_verbs: the plan
// of a run, and one server (on host B) and one client (on host A) per
// mechanism as real processes, each in its host's network namespace
// (harness/pair_runner.hpp runs the pair). Every step has a deadline; a
// mechanism that fails becomes an error and the next runs.
//
// Threading: single-threaded; it sleeps in poll() while children work.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "harness/files.hpp"
#include "harness/hosts.hpp"
#include "harness/latency.hpp"

namespace mcdma::bench {

struct LinkPlan {
  std::string program = "mcdma_bench_link";  // names the run in messages
  std::string self_exe;                      // this binary, re-executed for every endpoint
  std::string daemon_path;                   // mcdma-rpcd
  std::string mcdmactl_path;                 // mcdmactl (link state)
  std::string iperf3_path;                   // empty: iperf3 rows are skipped
  std::string daemon_log_level = "warn";     // both daemons' --log-level
  std::vector<std::string> daemon_args;      // extra flags for both daemons
  std::string daemon_log_dir;                // the daemons' logs; empty: the run's temp dir
  // Per host (0: A, 1: B), its --rail addresses (rails mode); none: no rails.
  std::vector<std::vector<std::string>> host_rails;
  // How the daemons link: the --peer suffix, and what `mcdmactl links`
  // must show once the link is up ("tcp" or "verbs"). With verbs, each
  // host's verbs_device/verbs_interface and this profile are passed on.
  std::string transport = "tcp";
  std::string verbs_profile;
  std::vector<size_t> payloads;
  int iterations = 0;
  int warmup = 0;
  int timeout_ms = 5000;      // one round trip, one readiness wait
  int run_limit_ms = 300000;  // one client run
  int link_wait_ms = 30000;   // daemons started until the link is up
  uint64_t bulk_bytes = 0;
  uint64_t op_bytes = 0;
  int repeats = 0;
};

// The plan from a benchmark's options (any struct with these fields, as
// LinkOptions and VerbsOptions have), run by `self`; an empty daemon or
// mcdmactl path means the one in this build tree, next to `self`.
template <typename Options>
LinkPlan PlanFrom(const Options& o, const std::string& self) {
  LinkPlan plan;
  plan.self_exe = self;
  plan.daemon_path = o.daemon.empty() ? harness::NextTo(self, "../daemon/mcdma-rpcd") : o.daemon;
  plan.mcdmactl_path =
      o.mcdmactl.empty() ? harness::NextTo(self, "../tools/mcdmactl/mcdmactl") : o.mcdmactl;
  plan.daemon_log_level = o.daemon_log_level;
  plan.daemon_args = o.daemon_args;
  plan.payloads = o.payloads;
  plan.iterations = o.iterations;
  plan.warmup = o.warmup;
  plan.timeout_ms = o.timeout_ms;
  plan.run_limit_ms = o.run_limit_s * 1000;
  plan.link_wait_ms = o.link_wait_s * 1000;
  plan.bulk_bytes = o.bulk_bytes;
  plan.op_bytes = o.op_bytes;
  plan.repeats = o.repeats;
  return plan;
}

// One server/client pair. The server gets --address <host B address>; a
// server that reports a port (SignalReadyPort) has its client told
// --address <host B address>:<port>.
struct LinkPair {
  std::string key;  // names the sample and stderr files
  std::string server_role;
  std::string client_role;
  std::vector<std::string> server_args;  // role-specific extras
  std::vector<std::string> client_args;
  std::chrono::milliseconds ready_timeout{10000};
  // What the client's sample file must hold: this many sets of this many
  // samples each.
  size_t expect_sets = 0;
  size_t expect_samples = 0;
};

// Runs `pair` between hosts[1] (B, the server) and hosts[0] (A, the
// client), files in `dir`.
Result<std::vector<harness::SampleSet>> RunLinkPair(const LinkPlan& plan,
                                                    const harness::Hosts& hosts,
                                                    const harness::TempDir& dir, LinkPair pair);

}  // namespace mcdma::bench
