// The two daemons of mcdma_bench_link and mcdma_bench_verbs: mcdma-rpcd on
// host B (peer service listening, no --peer) and on host A (--peer
// host-b=<B>,<plan.transport>), sharing a fresh fabric key, each in its
// host's namespace (and on its RDMA device, for verbs). Start() returns
// once `mcdmactl links --json` on A shows the link to host-b "up" over
// plan.transport; a link that comes up over another transport is an error,
// not a figure.
//
// Ownership: the DaemonPair owns both processes; destruction stops A, then
// B (SIGTERM, 5 s to drain, then SIGKILL). Their stderr (log level and
// any extra flags from the plan) goes to rpcd-a.log and rpcd-b.log in
// plan.daemon_log_dir (else the run's directory); failures quote the last
// lines.
//
// Threading: the orchestrator's thread only.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "link_hosts.hpp"
#include "link_orchestrator.hpp"
#include "process.hpp"

namespace bench {

class DaemonPair {
 public:
  static mcdma::Result<std::unique_ptr<DaemonPair>> Start(const LinkPlan& plan,
                                                          const HostPair& hosts,
                                                          const TempDir& dir);
  ~DaemonPair();
  DaemonPair(const DaemonPair&) = delete;
  DaemonPair& operator=(const DaemonPair&) = delete;

  const std::string& socket_a() const { return socket_a_; }
  const std::string& socket_b() const { return socket_b_; }
  // "link host-a -> host-b up after 0.6 s (transport tcp)", or why the
  // link state could not be read.
  const std::string& note() const { return note_; }
  // The last `lines` lines of both logs, each prefixed with its host, for a
  // failure report.
  std::string LogTails(int lines) const;
  // "" while both daemons run; else which ended, how, and its last two log
  // lines.
  std::string Exited();
  // `mcdmactl link test host-b --bytes N --count M` on host A: the two
  // daemons echoing over their link with no app involved. Round trips in
  // ns, as the daemon timed them. kNotFound without mcdmactl.
  mcdma::Result<std::vector<uint64_t>> LinkTest(const LinkPlan& plan, const TempDir& dir,
                                                size_t bytes, int count);

 private:
  DaemonPair() = default;
  mcdma::Status WaitForSockets();
  mcdma::Status WaitForLink(const LinkPlan& plan, const TempDir& dir);

  std::string socket_a_;
  std::string socket_b_;
  std::string log_a_;
  std::string log_b_;
  std::string note_;
  std::optional<ChildProcess> b_;  // started first, stopped last
  std::optional<ChildProcess> a_;
};

}  // namespace bench
