// The two hosts of mcdma_bench_link: two network namespaces joined by a
// veth pair, made and removed by tests/netns/hosts.sh, or — where
// namespaces cannot be made (`hosts.sh check` exits 77) or --loopback asks
// for it — this machine's loopback, twice.
//
// Ownership: HostPair owns the namespaces. Its destructor removes them
// (`hosts.sh down`), and while it lives SIGINT, SIGTERM and SIGHUP run the
// same removal before the process dies, so an interrupted run leaves no
// namespace behind. A crash (SIGKILL, SIGSEGV) can still leave them; rerun
// `tests/netns/hosts.sh down PREFIX` with the prefix the run printed.
//
// Threading: the orchestrator's thread only.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "mcdma/status.hpp"
#include "process.hpp"

namespace bench {

struct LinkHost {
  std::string id;       // the daemon's --host-id: "host-a" or "host-b"
  std::string netns;    // network namespace; empty on loopback
  std::string address;  // IPv4 address its servers listen on
  // The RDMA device and the interface its GID is on, for a daemon linked
  // over verbs (--verbs-device, --verbs-interface); empty for tcp.
  std::string verbs_device;
  std::string verbs_interface;
};

// Runs `argv` to completion within `timeout` (then SIGKILL: kTimeout), its
// stdout and stderr sent to the given files when set. Returns the raw wait
// status (see DescribeWaitStatus).
mcdma::Result<int> RunCommand(const std::vector<std::string>& argv, const std::string& stdout_path,
                              const std::string& stderr_path, std::chrono::milliseconds timeout);
// The exit code of a raw wait status; -1 when the process was killed.
int ExitCode(int wait_status);
// A whole file as text; "" when it cannot be read.
std::string ReadTextFile(const std::string& path);
// The last non-empty line of `text`.
std::string LastLine(const std::string& text);
// The last `lines` non-empty lines of `text`, each ending in a newline.
std::string LastLines(const std::string& text, int lines);
// The first executable `name` on $PATH; "" when there is none.
std::string FindInPath(const std::string& name);

class HostPair {
 public:
  // Namespaces PREFIX-a and PREFIX-b with PREFIX "mcbl<pid>", made by
  // `bash script up PREFIX`; loopback when `force_loopback` is set or
  // `script check` exits 77 (note() then says why). Any other failure of
  // the script is an error (and whatever it made is removed).
  static mcdma::Result<std::unique_ptr<HostPair>> Create(const std::string& script,
                                                         bool force_loopback, const TempDir& dir);
  // Two hosts that already exist in this namespace, each with its own
  // address (the Soft-RoCE VM: policy routing sends their packets across a
  // veth pair). Nothing is made or removed; ports are picked as on
  // loopback.
  static std::unique_ptr<HostPair> Fixed(LinkHost a, LinkHost b, std::string note);
  ~HostPair();
  HostPair(const HostPair&) = delete;
  HostPair& operator=(const HostPair&) = delete;

  const LinkHost& a() const { return a_; }
  const LinkHost& b() const { return b_; }
  bool loopback() const { return a_.netns.empty(); }
  // One line for the report: where the hosts are and how they are joined.
  const std::string& note() const { return note_; }
  // `argv` as run on `host`: prefixed with `ip netns exec NS` (which execs
  // in place, so the pid, the inherited descriptors and PR_SET_PDEATHSIG
  // carry over), or unchanged on loopback.
  std::vector<std::string> On(const LinkHost& host, std::vector<std::string> argv) const;
  // A TCP port for a daemon or tool that needs a fixed one: `netns_port`
  // in a namespace (nothing else listens there), a currently free port on
  // loopback (bound and released: another process could take it first).
  mcdma::Result<uint16_t> Port(uint16_t netns_port) const;

 private:
  HostPair() = default;
  void RemoveNamespaces();

  LinkHost a_;
  LinkHost b_;
  std::string note_;
  std::string ip_path_;
  std::vector<std::string> down_argv_;  // empty on loopback
};

}  // namespace bench
