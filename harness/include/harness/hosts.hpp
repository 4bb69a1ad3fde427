// Simulated hosts on this machine: N network namespaces PREFIX-a,
// PREFIX-b, ... made and removed by tests/netns/hosts.sh (two joined by a
// veth pair, more by a bridge), or hosts that share this namespace
// (loopback, or addresses that already exist, as in the Soft-RoCE VM).
//
// Ownership: Hosts owns the namespaces it made; its destructor removes
// them (`hosts.sh down`). With RemoveOnSignals(), SIGINT, SIGTERM and SIGHUP
// run the same removal before the process dies; a crash (SIGKILL,
// SIGSEGV) can still leave them: `tests/netns/hosts.sh down PREFIX`.
//
// Threading: the owner's thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "harness/child.hpp"

namespace mcdma::harness {

struct Host {
  std::string id;       // the daemon's --host-id: "host-a", "host-b", ...
  std::string netns;    // its network namespace; "" when it shares this one
  std::string address;  // IPv4 address its daemon and servers listen on
  // The RDMA device and the interface its GID is on, for a daemon linked
  // over verbs (--verbs-device, --verbs-interface); empty for tcp.
  std::string verbs_device;
  std::string verbs_interface;
};

// The id of host `index`: "host-a", "host-b", ...
std::string HostId(size_t index);
// `argv` as run in network namespace `netns`: prefixed with `ip netns exec
// NS` (which execs in place, so the pid, the inherited descriptors and
// PR_SET_PDEATHSIG carry over); unchanged for "".
std::vector<std::string> InNamespace(const std::string& netns, std::vector<std::string> argv);
// `count` distinct TCP ports free on 127.0.0.1 now (all bound at once,
// then released: another process could take one first); fewer on failure.
std::vector<uint16_t> FreePorts(size_t count);

class Hosts {
 public:
  // What hosts.sh check exits with where namespaces cannot be made.
  static constexpr int kCheckUnavailable = 77;

  // `bash script check`: OK where namespaces can be made; kUnavailable with
  // the script's reason (or no ip(8)) where they cannot; kInternal for any
  // other failure.
  static Status Check(const std::string& script);
  // `count` (2 to 26) hosts in namespaces PREFIX-a, ... by `bash script up
  // PREFIX COUNT`, after a `down` of whatever a crashed run with the same
  // prefix left. On failure whatever was made is removed.
  static Result<std::unique_ptr<Hosts>> MakeNamespaces(const std::string& script,
                                                       const std::string& prefix, size_t count);
  // Hosts that share this namespace: `count` on 127.0.0.1, or the given
  // ones (their netns cleared). Nothing is made or removed.
  static std::unique_ptr<Hosts> Loopback(size_t count);
  static std::unique_ptr<Hosts> Shared(std::vector<Host> hosts);
  ~Hosts();
  Hosts(const Hosts&) = delete;
  Hosts& operator=(const Hosts&) = delete;

  size_t size() const { return hosts_.size(); }
  const Host& operator[](size_t i) const { return hosts_[i]; }
  const std::vector<Host>& all() const { return hosts_; }
  // True for namespaces this object made (and removes).
  bool netns() const { return !prefix_.empty(); }
  const std::string& prefix() const { return prefix_; }
  // `argv` as run on `host` (InNamespace).
  std::vector<std::string> On(const Host& host, std::vector<std::string> argv) const {
    return InNamespace(host.netns, std::move(argv));
  }
  // A TCP port for a daemon or tool that needs a fixed one: `netns_port`
  // in a namespace (nothing else listens there), a free one otherwise.
  Result<uint16_t> Port(uint16_t netns_port) const;

  // `bash script CMD PREFIX`: "cut" takes every host's link down, "restore"
  // brings them back. Only for namespaces (else: not run, and said so).
  CommandResult Script(const std::string& cmd) const;
  // Removes the namespaces now (`hosts.sh down`); later calls and the
  // destructor do nothing (exit status 0), as without namespaces.
  CommandResult Down();
  // While this object lives, SIGINT, SIGTERM and SIGHUP remove the
  // namespaces before the process dies of the signal. One Hosts at a time.
  void RemoveOnSignals();

 private:
  Hosts() = default;

  std::vector<Host> hosts_;
  std::string script_;
  std::string prefix_;                  // "" without namespaces
  std::vector<std::string> down_argv_;  // empty once removed
  bool on_signals_ = false;
};

}  // namespace mcdma::harness
