// A real etcd (one member) for the tests: its own ports, its own data
// directory, its log in a file there. Stop and Restart keep the ports and
// the data, so a client must reconnect to the same address and finds its
// keys again (leases included, as etcd restores them).
//
// The binary is etcd from PATH or /usr/bin/etcd, and readiness is asked of
// etcdctl (`endpoint health`), both from Debian's etcd-server and
// etcd-client packages: scripts/install-deps.sh installs them, and Start
// says so when they are missing.
//
// Threading: an EtcdServer belongs to the thread that made it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "harness/child.hpp"
#include "harness/files.hpp"
#include "mcdma/status.hpp"

namespace mcdma::harness {

class EtcdServer {
 public:
  struct Options {
    // Where it listens for clients and its (unused) peer port.
    std::string address = "127.0.0.1";
    // The network namespace to run it in (ip netns exec); "": this one.
    std::string netns;
    // Its data directory and log; "": a temporary directory removed with
    // the server. A directory given here is left in place.
    std::string dir;
    // 0: free ports picked on 127.0.0.1.
    uint16_t client_port = 0;
    uint16_t peer_port = 0;
    // How long Start and Restart wait for it to answer.
    Millis start_timeout{15000};
  };

  // Starts it and waits until it answers. NOT_FOUND naming
  // scripts/install-deps.sh when etcd or etcdctl is missing; UNAVAILABLE
  // (with the log's tail) when it exits; TIMEOUT when it does not answer
  // in time.
  static Result<std::unique_ptr<EtcdServer>> Start(const Options& options);
  static Result<std::unique_ptr<EtcdServer>> Start() { return Start(Options{}); }

  ~EtcdServer();  // SIGKILL and reap
  EtcdServer(const EtcdServer&) = delete;
  EtcdServer& operator=(const EtcdServer&) = delete;

  // SIGTERM, waiting up to 10 s (then SIGKILL). Idempotent.
  void Stop();
  // SIGKILL, as a crash would. Idempotent.
  void Kill();
  // Stops it if running, starts it again on the same ports and data, and
  // waits until it answers.
  Status Restart();
  bool running();

  // "ADDRESS:PORT" and "etcd://ADDRESS:PORT".
  std::string endpoint() const;
  std::string url() const { return "etcd://" + endpoint(); }
  const std::string& dir() const { return dir_; }
  // The last lines of its log, for failure messages.
  std::string LogTail(int lines = 40) const;
  // `etcdctl ARGS...` against it (in its namespace), run to completion.
  CommandResult Ctl(const std::vector<std::string>& args, Millis timeout) const;

 private:
  EtcdServer() = default;
  std::vector<std::string> Argv() const;
  // Spawns the process and waits for etcdctl to find it healthy.
  Status Launch();

  Options options_;
  std::string etcd_;
  std::string etcdctl_;
  std::unique_ptr<TempDir> temp_;  // only when options_.dir is empty
  std::string dir_;
  std::string log_;
  std::unique_ptr<Child> child_;
};

}  // namespace mcdma::harness
