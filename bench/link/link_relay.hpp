// `mcdma_bench_link relay`: what a relay costs. Four hosts cabled as a
// line a-b, b-c, c-d, each cable rate-limited (tc tbf, so the wires and not
// the CPUs set the pace), an mcdma-rpcd on each, members of one static
// fabric file (relay_fabric.hpp). An app on host a, which knows nothing of
// routes, moves bulk into an export served on b (the direct link), on c
// (through 1 relay) and on d (through 2 relays), and calls an echo service
// on each; one raw TCP stream and a raw TCP ping-pong over the a-b cable
// are the alternative. In one run: bulk through 1 and 2 relays as a ratio
// of the direct link, the call p50 per added hop, and the daemon over raw
// TCP on the direct cable. See bench/README.md.
//
// Threading: the orchestrator's thread only; it sleeps in poll() while the
// endpoint processes work.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "link_runner.hpp"  // MCDMA_BENCH_HOSTS_SCRIPT

namespace mcdma::bench {

// The fields a LinkPlan is made from carry its names (PlanFrom).
struct RelayOptions {
  std::string rate = "200mbit";       // tc tbf rate of each cable end; "none": not limited
  uint64_t bulk_bytes = 64ull << 20;  // per transfer (and buffer size)
  uint64_t op_bytes = 16ull << 20;
  int repeats = 3;
  int iterations = 1000;
  int warmup = 100;
  std::vector<size_t> payloads = {64};
  std::vector<std::string> parts = {"calls", "bulk", "tcp"};
  std::string json;
  std::string daemon;
  std::string mcdmactl;
  std::string hosts_script = MCDMA_BENCH_HOSTS_SCRIPT;
  std::string daemon_log_level = "warn";
  std::vector<std::string> daemon_args;
  std::string log_dir;  // empty: the daemons' logs go to the run's temp dir
  int timeout_ms = 5000;
  int run_limit_s = 300;
  int link_wait_s = 60;
};

// The `relay` subcommand with every option bound to `options`.
CLI::App* AddRelayCommand(CLI::App& app, RelayOptions& options);
// One whole relay run by `self` (this binary); the process exit code: 0
// everything ran and verified (targets met or not), 1 something failed
// (a FAILED line says what; the rest still runs), 77 namespaces cannot be
// made here.
int RunRelayBench(const RelayOptions& options, const std::string& self);

}  // namespace mcdma::bench
