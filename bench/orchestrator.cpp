#include "orchestrator.hpp"

#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <thread>

#include "baselines.hpp"
#include "platform/socket.hpp"

namespace bench {

namespace {

// Servers outlive the client run they serve by this much before their own
// idle limit ends them (the orchestrator normally stops them long before).
constexpr int kServerSlackMs = 60000;
// How long mcdma-rpcd may take to create its socket, and a server to report
// ready (the daemon server retries Connect for kConnectRetry on top).
constexpr auto kDaemonSocketWait = std::chrono::seconds(10);
constexpr auto kDaemonServerReadyWait = std::chrono::seconds(20);
constexpr auto kServerStopGrace = std::chrono::seconds(3);
constexpr auto kDaemonStopGrace = std::chrono::seconds(5);

// One server/client pair as the orchestrator starts it.
struct PairSpec {
  std::string key;  // mechanism key, names the sample file
  std::string server_role;
  std::string client_role;
  // The endpoints' program and its first arguments; empty: this binary's
  // hidden `child` command.
  std::vector<std::string> program;
  std::vector<std::string> server_args;  // role-specific extras
  std::vector<std::string> client_args;
  std::vector<int> server_fds;  // inherited descriptors
  std::vector<int> client_fds;
  // Descriptors handed down to the children: closed here once both have
  // them, so that one child exiting is seen by the other (EOF).
  std::vector<Fd> handed_fds;
  std::chrono::milliseconds ready_timeout{5000};
};

PairSpec MakeSpec(std::string key, std::string server_role, std::string client_role) {
  PairSpec spec;
  spec.key = std::move(key);
  spec.server_role = std::move(server_role);
  spec.client_role = std::move(client_role);
  return spec;
}

std::vector<std::string> BaseArgs(const Plan& plan, const PairSpec& spec, const std::string& role,
                                  int run_limit_ms) {
  std::string payloads;
  for (size_t p : plan.payloads) {
    if (!payloads.empty()) payloads += ',';
    payloads += std::to_string(p);
  }
  std::vector<std::string> args = spec.program;
  if (args.empty()) args = {plan.self_exe, "child"};
  args.insert(args.end(), {"--role", role, "--payloads", payloads, "--iterations",
                           std::to_string(plan.iterations), "--warmup", std::to_string(plan.warmup),
                           "--timeout-ms", std::to_string(plan.timeout_ms), "--run-limit-ms",
                           std::to_string(run_limit_ms)});
  return args;
}

bool ExitedCleanly(int status) {
  return status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

mcdma::Status CheckSamples(const Plan& plan, const std::vector<SampleSet>& sets) {
  bool complete = sets.size() == plan.payloads.size();
  for (size_t i = 0; complete && i < sets.size(); ++i) {
    complete = sets[i].payload == plan.payloads[i] &&
               sets[i].nanos.size() == static_cast<size_t>(plan.iterations);
  }
  if (complete) return mcdma::Status::Ok();
  return mcdma::Status(mcdma::Code::kInternal, "the client's sample file does not match the plan");
}

// Passes a client's captured stderr on to ours and returns its last line:
// the client's own words for why it failed.
std::string ForwardStderr(const std::string& path) {
  std::string text;
  if (FILE* f = fopen(path.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
    fclose(f);
  }
  fputs(text.c_str(), stderr);
  while (!text.empty() && text.back() == '\n') text.pop_back();
  size_t nl = text.rfind('\n');
  std::string last = nl == std::string::npos ? text : text.substr(nl + 1);
  // Strip our own "mcdma_bench_local <role>: " prefix; the row names the role.
  size_t colon = last.find(": ");
  if (last.rfind("mcdma_bench_local ", 0) == 0 && colon != std::string::npos)
    last = last.substr(colon + 2);
  return last;
}

mcdma::Result<std::vector<SampleSet>> RunPair(const Plan& plan, const TempDir& dir, PairSpec spec) {
  MCDMA_ASSIGN_OR_RETURN(Pipe ready, MakePipe());
  MCDMA_ASSIGN_OR_RETURN(Pipe lifeline, MakePipe());

  SpawnOptions server_spawn;
  server_spawn.name = spec.server_role;
  server_spawn.argv = BaseArgs(plan, spec, spec.server_role, plan.run_limit_ms + kServerSlackMs);
  server_spawn.keep_fds = spec.server_fds;
  server_spawn.argv.insert(server_spawn.argv.end(),
                           {"--ready-fd", std::to_string(ready.write.get()), "--lifeline-fd",
                            std::to_string(lifeline.read.get())});
  server_spawn.argv.insert(server_spawn.argv.end(), spec.server_args.begin(),
                           spec.server_args.end());
  server_spawn.keep_fds.push_back(ready.write.get());
  server_spawn.keep_fds.push_back(lifeline.read.get());
  MCDMA_ASSIGN_OR_RETURN(ChildProcess server, ChildProcess::Spawn(server_spawn));
  // Our copies go, so the ready pipe reports the server's death as EOF.
  ready.write.Reset();
  lifeline.read.Reset();

  mcdma::Status st = WaitReadyByte(ready.read.get(), spec.ready_timeout);
  if (!st.ok()) {
    int ws = server.Stop(SIGKILL, std::chrono::seconds(1));
    return mcdma::Status(st.code(), spec.server_role + " not ready: " + st.message() + " (" +
                                        DescribeWaitStatus(ws) + ")");
  }

  std::string out = dir.Join(spec.key + ".samples");
  SpawnOptions client_spawn;
  client_spawn.name = spec.client_role;
  client_spawn.argv = BaseArgs(plan, spec, spec.client_role, plan.run_limit_ms);
  client_spawn.keep_fds = spec.client_fds;
  client_spawn.argv.insert(client_spawn.argv.end(), {"--out", out});
  client_spawn.stderr_path = dir.Join(spec.key + ".client.stderr");
  client_spawn.argv.insert(client_spawn.argv.end(), spec.client_args.begin(),
                           spec.client_args.end());
  auto client = ChildProcess::Spawn(client_spawn);
  spec.handed_fds.clear();
  if (!client.ok()) return client.status();  // `server` is killed and reaped on return

  auto client_status = client->Wait(std::chrono::milliseconds(plan.run_limit_ms));
  if (!client_status.ok()) client->Kill();
  std::string client_said = ForwardStderr(client_spawn.stderr_path);
  // The server ends on its own (EOF, stop flag or lifeline); a server that
  // does not is a bug worth a line, but the client's figures stand.
  lifeline.write.Reset();
  auto server_status = server.Wait(kServerStopGrace);
  if (!server_status.ok()) {
    fprintf(stderr, "mcdma_bench_local: %s did not stop within %lld s; killed\n",
            spec.server_role.c_str(),
            static_cast<long long>(std::chrono::seconds(kServerStopGrace).count()));
    server.Kill();
  } else if (!ExitedCleanly(*server_status)) {
    fprintf(stderr, "mcdma_bench_local: %s ended with %s\n", spec.server_role.c_str(),
            DescribeWaitStatus(*server_status).c_str());
  }

  if (!client_status.ok()) {
    return mcdma::Status(mcdma::Code::kTimeout, spec.client_role + " did not finish within " +
                                                    std::to_string(plan.run_limit_ms / 1000) +
                                                    " s");
  }
  if (!ExitedCleanly(*client_status)) {
    std::string reason = client_said.empty() ? DescribeWaitStatus(*client_status) : client_said;
    return mcdma::Status(mcdma::Code::kInternal, spec.client_role + " failed: " + reason);
  }
  MCDMA_ASSIGN_OR_RETURN(std::vector<SampleSet> sets, ReadSamples(out));
  MCDMA_RETURN_IF_ERROR(CheckSamples(plan, sets));
  return sets;
}

mcdma::Result<std::vector<SampleSet>> RunUds(const Plan& plan, const TempDir& dir) {
  Fd server_end;
  Fd client_end;
  MCDMA_RETURN_IF_ERROR(mcdma::platform::OpenSocketPair(SOCK_STREAM, &server_end, &client_end));
  const int sv[2] = {server_end.get(), client_end.get()};
  PairSpec spec = MakeSpec("uds", "uds-server", "uds-client");
  spec.handed_fds.push_back(std::move(server_end));
  spec.handed_fds.push_back(std::move(client_end));
  spec.server_args = {"--fd", std::to_string(sv[0])};
  spec.client_args = {"--fd", std::to_string(sv[1])};
  spec.server_fds = {sv[0]};
  spec.client_fds = {sv[1]};
  return RunPair(plan, dir, std::move(spec));
}

mcdma::Result<std::vector<SampleSet>> RunShm(const Plan& plan, const TempDir& dir) {
  size_t max_payload = 0;
  for (size_t p : plan.payloads) max_payload = std::max(max_payload, p);
  MCDMA_ASSIGN_OR_RETURN(Fd segment, CreateShmSegment(max_payload));
  int fd = segment.get();
  PairSpec spec = MakeSpec("shm", "shm-server", "shm-client");
  spec.handed_fds.push_back(std::move(segment));
  spec.server_args = spec.client_args = {"--fd", std::to_string(fd)};
  spec.server_fds = spec.client_fds = {fd};
  return RunPair(plan, dir, std::move(spec));
}

mcdma::Result<std::vector<SampleSet>> RunGrpc(const Plan& plan, const TempDir& dir) {
  PairSpec spec = MakeSpec("grpc", "grpc-server", "grpc-client");
  spec.server_args = spec.client_args = {"--socket", dir.Join("grpc.sock")};
  return RunPair(plan, dir, std::move(spec));
}

// The daemon rows: mcdma-rpcd and, through it, a pair of C++ apps
// (`spec` as MakeSpec("daemon", ...)) or of Python apps.
mcdma::Result<std::vector<SampleSet>> RunDaemon(const Plan& plan, const TempDir& dir,
                                                PairSpec spec) {
  if (access(plan.daemon_path.c_str(), X_OK) != 0) {
    return mcdma::Status(mcdma::Code::kNotFound, "no executable mcdma-rpcd at " + plan.daemon_path +
                                                     " (build it or pass --daemon)");
  }
  std::string socket = dir.Join("rpcd.sock");
  SpawnOptions daemon_spawn;
  daemon_spawn.name = "mcdma-rpcd";
  daemon_spawn.argv = {plan.daemon_path, "--socket", socket, "--log-level", "warn"};
  MCDMA_ASSIGN_OR_RETURN(ChildProcess daemon, ChildProcess::Spawn(daemon_spawn));
  // The socket file is the first sign of life; Connect (in the children)
  // is the real readiness test and is retried there.
  auto deadline = Clock::now() + kDaemonSocketWait;
  struct stat st;
  while (stat(socket.c_str(), &st) != 0) {
    auto exited = daemon.Wait(std::chrono::milliseconds(0));
    if (exited.ok()) {
      return mcdma::Status(
          mcdma::Code::kUnavailable,
          "mcdma-rpcd ended before creating its socket (" + DescribeWaitStatus(*exited) + ")");
    }
    if (Clock::now() >= deadline) {
      return mcdma::Status(mcdma::Code::kTimeout,
                           "mcdma-rpcd created no socket at " + socket + " within 10 s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  spec.server_args = spec.client_args = {"--socket", socket};
  spec.ready_timeout = kDaemonServerReadyWait;
  auto sets = RunPair(plan, dir, std::move(spec));

  int status = daemon.Stop(SIGTERM, kDaemonStopGrace);
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
    fprintf(stderr,
            "mcdma_bench_local: mcdma-rpcd did not drain within %lld s of SIGTERM; killed\n",
            static_cast<long long>(std::chrono::seconds(kDaemonStopGrace).count()));
  } else if (!ExitedCleanly(status) && !(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM)) {
    fprintf(stderr, "mcdma_bench_local: mcdma-rpcd ended with %s\n",
            DescribeWaitStatus(status).c_str());
  }
  return sets;
}

mcdma::Result<std::vector<SampleSet>> RunPython(const Plan& plan, const TempDir& dir,
                                                const char* server_role) {
  if (access(plan.python.c_str(), X_OK) != 0) {
    return mcdma::Status(mcdma::Code::kNotFound, "no Python interpreter at " + plan.python);
  }
  if (access(plan.python_roles.c_str(), R_OK) != 0) {
    return mcdma::Status(mcdma::Code::kNotFound,
                         "no " + plan.python_roles + " (the build copies python_roles.py there)");
  }
  PairSpec spec = MakeSpec(server_role, server_role, "python-client");
  spec.program = {plan.python, plan.python_roles};
  return RunDaemon(plan, dir, std::move(spec));
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

mcdma::Result<std::vector<SampleSet>> RunMechanism(Mechanism mechanism, const Plan& plan,
                                                   const TempDir& dir) {
  switch (mechanism) {
    case Mechanism::kDaemon:
      return RunDaemon(plan, dir, MakeSpec("daemon", "daemon-server", "daemon-client"));
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
  return mcdma::Status(mcdma::Code::kInvalid, "unknown mechanism");
}

}  // namespace bench
