// mcdma_bench_local's orchestrator: runs each mechanism as real processes
// and collects what their clients measured. For every mechanism it starts
// the server (and for the daemon rows, mcdma-rpcd first), runs one client
// process over all payloads (harness/pair_runner.hpp), then stops
// everything it started. Every step has a deadline; a mechanism that fails
// becomes an error, and the next one still runs.
//
// Threading: single-threaded; it sleeps in poll() while children work, so it
// takes no CPU away from the endpoints being measured.
#pragma once

#include <string>
#include <vector>

#include "harness/files.hpp"
#include "harness/latency.hpp"
#include "mcdma/status.hpp"

namespace mcdma::bench {

enum class Mechanism { kDaemon, kPython, kPythonQueued, kShm, kUds, kGrpc };

struct MechanismInfo {
  Mechanism mechanism;
  const char* key;        // --mechanisms name and JSON key
  const char* label;      // table label
  const char* transport;  // what carries the bytes
};
// In run and table order: the daemon first, it is what the others are
// compared with.
const std::vector<MechanismInfo>& AllMechanisms();

struct Plan {
  std::string self_exe;     // this binary, re-executed for every endpoint
  std::string daemon_path;  // mcdma-rpcd
  // The Python rows: the interpreter and python_roles.py next to this
  // binary (its environment must import mcdma: the orchestrator sets
  // PYTHONPATH).
  std::string python;
  std::string python_roles;
  std::vector<size_t> payloads;
  int iterations = 0;
  int warmup = 0;
  int timeout_ms = 5000;      // one round trip, one readiness wait
  int run_limit_ms = 300000;  // one client run (all payloads)
};

// Runs `mechanism` in `dir` (sockets and sample files go there). Returns
// the client's samples, one set per payload in plan order.
Result<std::vector<harness::SampleSet>> RunMechanism(Mechanism mechanism, const Plan& plan,
                                                     const harness::TempDir& dir);

}  // namespace mcdma::bench
