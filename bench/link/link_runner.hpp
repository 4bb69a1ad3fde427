// One whole mcdma_bench_link run: make the hosts, run every selected
// mechanism (baselines first, then the daemons), print the tables and the
// targets, write --json, remove the hosts. Returns the process exit code.
#pragma once

#include <string>
#include <vector>

#include "link_orchestrator.hpp"
#include "link_report.hpp"
#include "link_roles.hpp"

#ifndef MCDMA_BENCH_HOSTS_SCRIPT
#define MCDMA_BENCH_HOSTS_SCRIPT "tests/netns/hosts.sh"
#endif

namespace mcdma::bench {

// The orchestrator's options, each with its default.
struct LinkOptions {
  int iterations = 5000;
  int warmup = 500;
  std::vector<size_t> payloads = {64, 4096};
  uint64_t bulk_bytes = 1ull << 30;  // 1 GiB
  uint64_t op_bytes = 64ull << 20;   // 64 MiB pieces: 16 per 1 GiB batch
  int repeats = 5;
  std::vector<std::string> mechanisms = {"daemon", "tcp", "grpc", "zmq", "iperf3"};
  std::vector<std::string> parts = {"calls", "bulk"};
  bool loopback = false;
  std::string json;
  std::string daemon;    // empty: <bench dir>/../daemon/mcdma-rpcd
  std::string mcdmactl;  // empty: <bench dir>/../tools/mcdmactl/mcdmactl
  std::string iperf3;    // empty: iperf3 on PATH
  std::string hosts_script = MCDMA_BENCH_HOSTS_SCRIPT;
  std::string daemon_log_level = "warn";
  std::vector<std::string> daemon_args;  // --daemon-arg=FLAG, repeatable
  int timeout_ms = 5000;
  int run_limit_s = 300;
  int link_wait_s = 30;
};

int RunLinkBench(const LinkOptions& options, const LinkPlan& plan);

}  // namespace mcdma::bench
