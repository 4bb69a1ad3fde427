// The two daemons of mcdma_bench_link and mcdma_bench_verbs: mcdma-rpcd on
// host B (peer service listening, no --peer) and on host A (--peer
// host-b=<B>,<plan.transport>), sharing a fresh fabric key, each in its
// host's namespace (and on its RDMA device, for verbs; with its
// plan.host_rails as --rail, for the rails mode), started by the harness
// (harness/daemons.hpp). Start() returns once `mcdmactl links
// --json` on A shows the link to host-b "up" over plan.transport; a link
// that comes up over another transport is an error, not a figure.
//
// Ownership: the DaemonPair owns both processes; destruction stops A, then
// B (SIGTERM, 5 s to drain, then SIGKILL). Their stderr (log level and
// any extra flags from the plan) goes to rpcd-a.log and rpcd-b.log in
// plan.daemon_log_dir (else the run's directory); failures quote the last
// lines.
//
// Threading: the orchestrator's thread only.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "harness/daemons.hpp"
#include "harness/files.hpp"
#include "harness/hosts.hpp"
#include "link_orchestrator.hpp"

namespace mcdma::bench {

class DaemonPair {
 public:
  static Result<std::unique_ptr<DaemonPair>> Start(const LinkPlan& plan,
                                                   const harness::Hosts& hosts,
                                                   const harness::TempDir& dir);
  ~DaemonPair();
  DaemonPair(const DaemonPair&) = delete;
  DaemonPair& operator=(const DaemonPair&) = delete;

  const std::string& socket_a() const { return a_.socket; }
  const std::string& socket_b() const { return b_.socket; }
  // "link host-a -> host-b up after 0.6 s (transport tcp)", or why the
  // link state could not be read.
  const std::string& note() const { return note_; }
  // `mcdmactl links --json` of host 0 (A) or 1 (B), parsed; `raw` gets the text.
  Result<v1::LinksReply> Links(const LinkPlan& plan, size_t host, std::string* raw = nullptr) const;
  // The daemon process of host 0 (A) or 1 (B); -1 when not running.
  pid_t pid(size_t host) const;
  // The last `lines` lines of both logs, each prefixed with its host, for a
  // failure report.
  std::string LogTails(int lines) const;
  // "" while both daemons run; else which ended, how, and its last two log
  // lines.
  std::string Exited();
  // `mcdmactl link test host-b --bytes N --count M` on host A: the two
  // daemons echoing over their link with no app involved. Round trips in
  // ns, as the daemon timed them. kNotFound without mcdmactl.
  Result<std::vector<uint64_t>> LinkTest(const LinkPlan& plan, size_t bytes, int count);
  // `mcdmactl trace host-b --bytes N --count M` on host A, against
  // `mcdmactl bench --serve` on host B (started and stopped here; its
  // stderr goes to `log`): where a call's microseconds go, stage by stage.
  // The table it printed. kNotFound without mcdmactl.
  Result<std::string> Trace(const LinkPlan& plan, size_t bytes, int count, int warmup,
                            const std::string& log);

 private:
  DaemonPair() = default;
  Status WaitForLink(const LinkPlan& plan);

  std::string program_;
  harness::DaemonHost b_;  // started first, stopped last
  harness::DaemonHost a_;
  std::string note_;
};

}  // namespace mcdma::bench
