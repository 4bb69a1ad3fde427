#include "harness/pair_runner.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

namespace mcdma::harness {
namespace {

constexpr Millis kServerStopGrace(3000);

Status PipeError(const char* call) {
  return Status(Code::kSystem, std::string(call) + ": " + strerror(errno));
}

std::string ProcessName(const std::string& role, const std::string& host) {
  return host.empty() ? role : role + " (" + host + ")";
}

// Passes a child's captured stderr on to ours and returns its last line
// without the "PROGRAM ROLE: " prefix: its own words for why it failed
// (the caller's message already names the role).
std::string ForwardStderr(const std::string& program, const std::string& path) {
  std::string text = ReadFile(path);
  fputs(text.c_str(), stderr);
  std::string last = LastLine(text);
  size_t colon = last.find(": ");
  if (last.rfind(program + " ", 0) == 0 && colon != std::string::npos)
    last = last.substr(colon + 2);
  return last;
}

Status CheckSamples(const PairRun& run, const std::vector<SampleSet>& sets) {
  bool complete = sets.size() == run.expect_sets;
  for (size_t i = 0; complete && i < sets.size(); ++i) {
    complete = sets[i].nanos.size() == run.expect_samples &&
               (run.expect_payloads.empty() || sets[i].payload == run.expect_payloads[i]);
  }
  if (complete) return Status::Ok();
  return Status(Code::kInternal, "the client's sample file does not match the plan");
}

SpawnOptions EndpointSpawn(const std::string& name, const std::string& stderr_path,
                           std::vector<int> keep_fds) {
  SpawnOptions o = LoggedSpawn(name, stderr_path);
  o.keep_fds = std::move(keep_fds);
  return o;
}

}  // namespace

Result<Pipe> MakePipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return PipeError("pipe2");
  return Pipe{Fd(fds[0]), Fd(fds[1])};
}

Status WaitReadable(int fd, Millis timeout) {
  auto deadline = Clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
    if (left.count() < 0) left = Millis(0);
    pollfd p{fd, POLLIN, 0};
    int rc = poll(&p, 1, static_cast<int>(left.count()));
    if (rc > 0) return Status::Ok();
    if (rc < 0 && errno != EINTR) return PipeError("poll");
    if (rc == 0) return Status(Code::kTimeout, "no data within the deadline");
  }
}

Result<std::string> WaitReadyMessage(int fd, Millis timeout) {
  auto deadline = Clock::now() + timeout;
  std::string text;
  for (;;) {
    auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
    if (left.count() < 0) left = Millis(0);
    MCDMA_RETURN_IF_ERROR(WaitReadable(fd, left));
    char buf[64];
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return PipeError("read(ready pipe)");
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > 4096) break;  // no server says this much; stop reading
  }
  if (text.empty()) return Status(Code::kPeerGone, "exited before it was ready");
  return text;
}

void StopChild(const std::string& program, Child& child, Millis grace) {
  if (child.exit_status()) return;
  int status = child.Stop(SIGTERM, grace);
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
    fprintf(stderr, "%s: %s did not stop within %lld ms of SIGTERM; killed\n", program.c_str(),
            child.name().c_str(), static_cast<long long>(grace.count()));
  } else if (ExitCode(status) != 0 && !(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM)) {
    fprintf(stderr, "%s: %s ended with %s\n", program.c_str(), child.name().c_str(),
            DescribeStatus(status).c_str());
  }
}

Result<std::vector<SampleSet>> RunPair(const TempDir& dir, PairRun run) {
  MCDMA_ASSIGN_OR_RETURN(Pipe ready, MakePipe());
  MCDMA_ASSIGN_OR_RETURN(Pipe lifeline, MakePipe());

  std::vector<std::string> server_argv = run.server_argv;
  server_argv.insert(server_argv.end(), {"--ready-fd", std::to_string(ready.write.get()),
                                         "--lifeline-fd", std::to_string(lifeline.read.get())});
  std::vector<int> server_fds = run.server_fds;
  server_fds.insert(server_fds.end(), {ready.write.get(), lifeline.read.get()});
  SpawnOptions server_spawn = EndpointSpawn(ProcessName(run.server_role, run.server_host),
                                            dir.Join(run.key + ".server.stderr"), server_fds);
  MCDMA_ASSIGN_OR_RETURN(std::unique_ptr<Child> server, Child::Spawn(server_argv, server_spawn));
  // Our copies go, so the ready pipe reports the server's death as EOF.
  ready.write.Reset();
  lifeline.read.Reset();

  auto said = WaitReadyMessage(ready.read.get(), run.ready_timeout);
  if (!said.ok()) {
    int ws = server->Stop(SIGKILL, Millis(1000));
    std::string why = ForwardStderr(run.program, server_spawn.stderr_path);
    return Status(said.status().code(), run.server_role + " not ready: " + said.status().message() +
                                            " (" + DescribeStatus(ws) +
                                            (why.empty() ? "" : ": " + why) + ")");
  }

  std::string out = dir.Join(run.key + ".samples");
  std::vector<std::string> client_argv = run.client_argv;
  client_argv.insert(client_argv.end(), {"--out", out});
  if (said->size() > 1 && (*said)[0] == 'P') {
    client_argv.insert(client_argv.end(),
                       {"--address", run.server_address + ":" + said->substr(1)});
  }
  SpawnOptions client_spawn = EndpointSpawn(ProcessName(run.client_role, run.client_host),
                                            dir.Join(run.key + ".client.stderr"), run.client_fds);
  auto client = Child::Spawn(client_argv, client_spawn);
  run.handed_fds.clear();
  if (!client.ok()) return client.status();  // `server` is killed and reaped on return

  auto client_status = (*client)->WaitExit(run.run_limit);
  if (!client_status) (*client)->Kill();
  std::string client_said = ForwardStderr(run.program, client_spawn.stderr_path);
  // The server ends on its own (client EOF or lifeline); one that does not
  // is worth a line, but the client's figures stand.
  lifeline.write.Reset();
  auto server_status = server->WaitExit(kServerStopGrace);
  if (!server_status) {
    fprintf(stderr, "%s: %s did not stop within %lld s; killed\n", run.program.c_str(),
            server->name().c_str(),
            static_cast<long long>(
                std::chrono::duration_cast<std::chrono::seconds>(kServerStopGrace).count()));
    server->Kill();
  }
  std::string server_said = ForwardStderr(run.program, server_spawn.stderr_path);
  if (server_status && ExitCode(*server_status) != 0) {
    fprintf(stderr, "%s: %s ended with %s\n", run.program.c_str(), server->name().c_str(),
            DescribeStatus(*server_status).c_str());
  }

  if (!client_status) {
    return Status(Code::kTimeout, run.client_role + " did not finish within " +
                                      std::to_string(run.run_limit.count() / 1000) + " s");
  }
  if (ExitCode(*client_status) != 0) {
    std::string reason = client_said.empty() ? DescribeStatus(*client_status) : client_said;
    if (!server_said.empty()) reason += " (server: " + server_said + ")";
    return Status(Code::kInternal, run.client_role + " failed: " + reason);
  }
  MCDMA_ASSIGN_OR_RETURN(std::vector<SampleSet> sets, ReadSamples(out));
  MCDMA_RETURN_IF_ERROR(CheckSamples(run, sets));
  return sets;
}

}  // namespace mcdma::harness
