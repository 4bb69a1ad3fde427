// `mcdma_bench_link rails`: bulk throughput of one link striped over 1, 2,
// 3 ... rate-limited rails, against one raw TCP stream per rail over the
// same wires; then the same transfer with rail 1 cut half-way.
//
// One setup: two network namespaces (`hosts.sh up`: their own veth, the
// link's rail 0, not rate-limited) and --max-rails more veth pairs
// (`hosts.sh rails PREFIX COUNT RATE`: tc tbf on both ends). For each N the
// daemons are started afresh with only rails 1..N as --rail, so rails
// N+1.. have no listener and carry nothing (their interfaces' tx counters
// are read to show it). See bench/README.md.
//
// Threading: the orchestrator's thread, plus one thread that cuts and
// restores the rail while the cut transfer runs.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "link_runner.hpp"  // MCDMA_BENCH_HOSTS_SCRIPT

namespace mcdma::bench {

struct RailsOptions {
  std::string rate = "400mbit";   // tc tbf rate of each rail end; "none": not limited
  uint64_t bytes = 512ull << 20;  // per transfer (and buffer size)
  uint64_t op_bytes = 64ull << 20;
  int max_rails = 3;
  int repeats = 3;
  std::vector<std::string> mechanisms = {"daemon", "tcp"};
  std::vector<int> cut_rails = {2, 3};  // the N whose transfer gets rail 1 cut; empty: none
  int restore_after_ms = 2000;
  std::string json;
  std::string daemon;
  std::string mcdmactl;
  std::string hosts_script = MCDMA_BENCH_HOSTS_SCRIPT;
  std::string daemon_log_level = "warn";
  std::vector<std::string> daemon_args;
  std::string log_dir;  // empty: the daemons' logs go to the run's temp dir
  int run_limit_s = 300;
  int link_wait_s = 30;
};

// The `rails` subcommand with every option bound to `options`.
CLI::App* AddRailsCommand(CLI::App& app, RailsOptions& options);
// One whole rails run by `self` (this binary); the process exit code: 0
// everything ran and verified (targets met or not), 1 something failed,
// 77 namespaces cannot be made here.
int RunRailsBench(const RailsOptions& options, const std::string& self);

}  // namespace mcdma::bench
