// mcdma_bench_verbs: what one run is told (VerbsOptions, from the command
// line) and what it works out before it starts (VerbsPlan: binary paths, GID
// indexes, the plan the shared link orchestrator runs its pairs from).
//
// The defaults fit the Soft-RoCE VM of tests/verbs/vm.sh: host A is rxe1 on
// veth0 (10.0.1.1) and runs every client; host B is rxe2 on veth1
// (10.0.1.2) and runs every server. Both "hosts" share the guest's one
// network namespace; policy routing there makes their packets cross the
// veth pair.
//
// Threading: built once by main, then read-only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "link_orchestrator.hpp"

namespace mcdma::bench {

// One side of the link: the device, the interface its GID is on, the
// address its daemon (and perftest's server, on B) listens on.
struct VerbsHost {
  std::string id;         // the daemon's --host-id
  std::string device;     // --verbs-device and perftest -d
  std::string interface;  // --verbs-interface
  std::string address;    // --listen / --data-listen host
  int gid_index = -1;     // perftest -x; -1: the RoCE v2 IPv4-mapped GID from sysfs
};

struct VerbsOptions {
  std::string out = "verbs-bench-out";  // where the CSVs, summary and logs go
  std::string profile = "linux-rc";     // both daemons' --verbs-profile
  VerbsHost a{"host-a", "rxe1", "veth0", "10.0.1.1"};
  VerbsHost b{"host-b", "rxe2", "veth1", "10.0.1.2"};
  std::vector<size_t> payloads = {1024, 4096};  // latency payloads
  int iterations = 2000;                        // timed round trips per payload
  int warmup = 200;                             // untimed round trips before them
  uint64_t bulk_bytes = 256ull << 20;           // bytes per bandwidth transfer
  uint64_t op_bytes = 64ull << 20;              // daemon WriteBatch/ReadBatch piece
  int repeats = 3;                              // timed transfers per direction
  uint64_t perftest_bw_bytes = 1ull << 20;      // perftest -s for ib_*_bw
  int perftest_read_depth = 16;                 // ib_read_bw -o (outstanding reads)
  int perftest_tx_depth = 16;                   // ib_*_bw -t; 0: perftest's own default (128)
  int perftest_limit_s = 120;                   // one perftest client run
  // Scheduling class of every process of the run (inherited): "normal"
  // (as started) or "idle" (SCHED_IDLE, so the guest kernel's rxe work
  // preempts them at once). See README: when the VM's CPUs are starved,
  // rxe's softirq work can fall to ksoftirqd behind busy-polling perftest
  // and round trips lock to the 4 ms scheduler tick.
  std::string sched = "normal";
  std::vector<std::string> parts = {"latency", "bandwidth"};
  std::vector<std::string> mechanisms = {"daemon", "perftest"};
  std::string daemon;        // empty: <bench dir>/../daemon/mcdma-rpcd
  std::string mcdmactl;      // empty: <bench dir>/../tools/mcdmactl/mcdmactl
  std::string perftest_dir;  // empty: ib_write_lat etc. on PATH
  std::string daemon_log_level = "info";
  std::vector<std::string> daemon_args;  // one more flag for both daemons, repeatable
  int timeout_ms = 10000;                // one round trip
  int run_limit_s = 600;                 // one client run (and one perftest run)
  int link_wait_s = 60;                  // daemons started until the verbs link is up
};

// What the run resolved from the options.
struct VerbsPlan {
  VerbsOptions options;
  std::string perftest_dir;  // "" when perftest is not selected
  // The shared orchestrator's plan (link_orchestrator.hpp): this binary,
  // the daemons, payloads, counts, bulk sizes and deadlines.
  LinkPlan link;
};

}  // namespace mcdma::bench
