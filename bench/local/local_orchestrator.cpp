#include "local_orchestrator.hpp"

#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "harness/daemons.hpp"
#include "harness/endpoint.hpp"
#include "harness/pair_runner.hpp"
#include "platform/socket.hpp"
#include "shm_pingpong.hpp"

namespace mcdma::bench {

namespace {

using harness::Millis;
using harness::PairRun;
using harness::SampleSet;
using harness::TempDir;
using platform::Fd;

constexpr char kProgram[] = "mcdma_bench_local";
// Servers outlive the client run they serve by this much before their own
// idle limit ends them (the orchestrator normally stops them long before).
constexpr int kServerSlackMs = 60000;
// How long mcdma-rpcd may take to listen, and a server to report ready
// (the daemon server retries Connect for kConnectRetry on top).
constexpr Millis kDaemonListenWait(10000);
constexpr Millis kDaemonServerReadyWait(20000);
constexpr Millis kDaemonStopGrace(5000);
constexpr Millis kServerReadyWait(5000);

// One server/client pair as the orchestrator starts it: `program` empty
// runs this binary's hidden `child` command.
PairRun MakeRun(const Plan& plan, const std::string& key, const std::string& server_role,
                const std::string& client_role, const std::vector<std::string>& program = {}) {
  PairRun run;
  run.program = kProgram;
  run.key = key;
  run.server_role = server_role;
  run.client_role = client_role;
  run.run_limit = Millis(plan.run_limit_ms);
  run.ready_timeout = kServerReadyWait;
  run.expect_sets = plan.payloads.size();
  run.expect_samples = static_cast<size_t>(plan.iterations);
  run.expect_payloads = plan.payloads;
  std::vector<std::string> argv =
      program.empty() ? std::vector<std::string>{plan.self_exe, "child"} : program;
  run.server_argv = harness::EndpointArgv(
      argv, harness::RoleFor(plan, server_role, plan.run_limit_ms + kServerSlackMs));
  run.client_argv =
      harness::EndpointArgv(argv, harness::RoleFor(plan, client_role, plan.run_limit_ms));
  return run;
}

// Both endpoints get `args` (and the client its own extras after them).
void AddArgs(PairRun& run, const std::vector<std::string>& server_args,
             const std::vector<std::string>& client_args) {
  run.server_argv.insert(run.server_argv.end(), server_args.begin(), server_args.end());
  run.client_argv.insert(run.client_argv.end(), client_args.begin(), client_args.end());
}

Result<std::vector<SampleSet>> RunUds(const Plan& plan, const TempDir& dir) {
  Fd server_end;
  Fd client_end;
  MCDMA_RETURN_IF_ERROR(platform::OpenSocketPair(SOCK_STREAM, &server_end, &client_end));
  PairRun run = MakeRun(plan, "uds", "uds-server", "uds-client");
  AddArgs(run, {"--fd", std::to_string(server_end.get())},
          {"--fd", std::to_string(client_end.get())});
  run.server_fds = {server_end.get()};
  run.client_fds = {client_end.get()};
  run.handed_fds.push_back(std::move(server_end));
  run.handed_fds.push_back(std::move(client_end));
  return harness::RunPair(dir, std::move(run));
}

Result<std::vector<SampleSet>> RunShm(const Plan& plan, const TempDir& dir) {
  size_t max_payload = 0;
  for (size_t p : plan.payloads) max_payload = std::max(max_payload, p);
  MCDMA_ASSIGN_OR_RETURN(Fd segment, CreateShmSegment(max_payload));
  const int fd = segment.get();
  PairRun run = MakeRun(plan, "shm", "shm-server", "shm-client");
  AddArgs(run, {"--fd", std::to_string(fd)}, {"--fd", std::to_string(fd)});
  run.server_fds = run.client_fds = {fd};
  run.handed_fds.push_back(std::move(segment));
  return harness::RunPair(dir, std::move(run));
}

Result<std::vector<SampleSet>> RunGrpc(const Plan& plan, const TempDir& dir) {
  PairRun run = MakeRun(plan, "grpc", "grpc-server", "grpc-client");
  AddArgs(run, {"--socket", dir.Join("grpc.sock")}, {"--socket", dir.Join("grpc.sock")});
  return harness::RunPair(dir, std::move(run));
}

// The daemon rows: mcdma-rpcd and, through it, a pair of C++ apps or of
// Python apps (`run` as MakeRun made it).
Result<std::vector<SampleSet>> RunDaemon(const Plan& plan, const TempDir& dir, PairRun run) {
  if (access(plan.daemon_path.c_str(), X_OK) != 0) {
    return Status(Code::kNotFound, "no executable mcdma-rpcd at " + plan.daemon_path +
                                       " (build it or pass --daemon)");
  }
  harness::DaemonHost host;
  host.socket = dir.Join("rpcd.sock");
  host.log_level = "warn";  // its stderr is ours: warnings and errors only
  MCDMA_RETURN_IF_ERROR(harness::StartDaemon(plan.daemon_path, host, kDaemonListenWait));
  AddArgs(run, {"--socket", host.socket}, {"--socket", host.socket});
  run.ready_timeout = kDaemonServerReadyWait;
  auto sets = harness::RunPair(dir, std::move(run));
  harness::StopChild(kProgram, *host.daemon, kDaemonStopGrace);
  return sets;
}

Result<std::vector<SampleSet>> RunPython(const Plan& plan, const TempDir& dir,
                                         const char* server_role) {
  if (access(plan.python.c_str(), X_OK) != 0) {
    return Status(Code::kNotFound, "no Python interpreter at " + plan.python);
  }
  if (access(plan.python_roles.c_str(), R_OK) != 0) {
    return Status(Code::kNotFound,
                  "no " + plan.python_roles + " (the build copies python_roles.py there)");
  }
  return RunDaemon(
      plan, dir,
      MakeRun(plan, server_role, server_role, "python-client", {plan.python, plan.python_roles}));
}

}  // namespace

const std::vector<MechanismInfo>& AllMechanisms() {
  static const std::vector<MechanismInfo> kAll = {
      {Mechanism::kDaemon, "daemon", "mcdma-rpcd call", "local"},
      {Mechanism::kPython, "python", "mcdma-rpcd call, Python (inline)", "local"},
      {Mechanism::kPythonQueued, "python-queued", "mcdma-rpcd call, Python (thread)", "local"},
      {Mechanism::kShm, "shm", "shm ping-pong (spin 50us, futex)", "shm"},
      {Mechanism::kUds, "uds", "Unix stream socket ping-pong", "unix"},
      {Mechanism::kGrpc, "grpc", "gRPC unary over Unix socket", "grpc-unix"},
  };
  return kAll;
}

Result<std::vector<SampleSet>> RunMechanism(Mechanism mechanism, const Plan& plan,
                                            const TempDir& dir) {
  switch (mechanism) {
    case Mechanism::kDaemon:
      return RunDaemon(plan, dir, MakeRun(plan, "daemon", "daemon-server", "daemon-client"));
    case Mechanism::kPython:
      return RunPython(plan, dir, "python-server");
    case Mechanism::kPythonQueued:
      return RunPython(plan, dir, "python-server-queued");
    case Mechanism::kShm:
      return RunShm(plan, dir);
    case Mechanism::kUds:
      return RunUds(plan, dir);
    case Mechanism::kGrpc:
      return RunGrpc(plan, dir);
  }
  return Status(Code::kInvalid, "unknown mechanism");
}

}  // namespace mcdma::bench
