// The orchestrator's side of a benchmark's endpoint processes: runs one
// server and one client (endpoint.hpp) as real processes, each possibly on
// its own host, and collects the samples the client measured. It starts
// the server, waits for its ready message, runs the client to the end,
// reads its sample file, then lets the server go (its lifeline closes).
// Every step has a deadline; a pair that fails is an error, never a hang
// or a stray process.
//
// Threading: the orchestrator's single thread; it sleeps in poll() while
// the children work, so it takes no CPU away from what is measured.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "harness/child.hpp"
#include "harness/files.hpp"
#include "harness/latency.hpp"
#include "mcdma/status.hpp"

namespace mcdma::harness {

// Both ends of a pipe, created close-on-exec: a child keeps only the ends
// it is explicitly handed (SpawnOptions::keep_fds).
struct Pipe {
  Fd read;
  Fd write;
};
Result<Pipe> MakePipe();

// Waits until `fd` is readable or hung up; kTimeout after `timeout`.
Status WaitReadable(int fd, Millis timeout);
// Reads everything a ready pipe carries until the writer closes it (a
// server that signalled readiness closes its end at once). kPeerGone when
// nothing came: the child died before it was ready.
Result<std::string> WaitReadyMessage(int fd, Millis timeout);

// One server/client pair.
struct PairRun {
  // The benchmark, for messages; its endpoints' error lines start with
  // "PROGRAM ROLE: " (RoleOptions::program), which is cut from the reason.
  std::string program;
  std::string key;  // names the sample and stderr files in the run's directory
  std::string server_role;
  std::string client_role;
  std::string server_host;  // "host-b", for messages; "" on a single host
  std::string client_host;
  // Whole command lines (already in their hosts' namespaces). RunPair adds
  // --ready-fd and --lifeline-fd to the server's, --out to the client's.
  std::vector<std::string> server_argv;
  std::vector<std::string> client_argv;
  // A server that reports its port ("P<port>", SignalReadyPort) has its
  // client told --address <server_address>:<port>.
  std::string server_address;
  std::vector<int> server_fds;  // descriptors each inherits
  std::vector<int> client_fds;
  // Descriptors handed down to the children: closed here once both have
  // them, so that one child exiting is seen by the other (EOF).
  std::vector<Fd> handed_fds;
  Millis ready_timeout{10000};
  Millis run_limit{300000};  // the client's whole run
  // What the client's sample file must hold: this many sets of this many
  // samples each, with these payloads when given.
  size_t expect_sets = 0;
  size_t expect_samples = 0;
  std::vector<size_t> expect_payloads;
};

// Runs `run` with its files in `dir`: the client's sample sets, or why
// not (the server not ready, the client failed or ran out of time, in its
// own words from its stderr; the server's too).
Result<std::vector<SampleSet>> RunPair(const TempDir& dir, PairRun run);

// Stops a child with SIGTERM (then SIGKILL after `grace`), saying on stderr
// ("PROGRAM: ...") when it needed the SIGKILL or ended badly.
void StopChild(const std::string& program, Child& child, Millis grace);

}  // namespace mcdma::harness
