#include "link_orchestrator.hpp"

#include <signal.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>

namespace bench {

namespace {

// Servers outlive the client run they serve by this much before their own
// idle limit ends them (the orchestrator normally stops them long before).
constexpr int kServerSlackMs = 60000;
constexpr auto kServerStopGrace = std::chrono::seconds(3);

std::vector<std::string> BaseArgs(const LinkPlan& plan, const std::string& role, int run_limit_ms) {
  std::string payloads;
  for (size_t p : plan.payloads) {
    if (!payloads.empty()) payloads += ',';
    payloads += std::to_string(p);
  }
  return {plan.self_exe,    "child",
          "--role",         role,
          "--payloads",     payloads,
          "--iterations",   std::to_string(plan.iterations),
          "--warmup",       std::to_string(plan.warmup),
          "--timeout-ms",   std::to_string(plan.timeout_ms),
          "--run-limit-ms", std::to_string(run_limit_ms),
          "--bulk-bytes",   std::to_string(plan.bulk_bytes),
          "--op-bytes",     std::to_string(plan.op_bytes),
          "--repeats",      std::to_string(plan.repeats)};
}

bool ExitedCleanly(int status) { return ExitCode(status) == 0; }

// Passes a child's captured stderr on to ours and returns its last line
// without our "mcdma_bench_link <role>: " prefix: its own words for why it
// failed (the row already names the role).
std::string ForwardStderr(const std::string& path) {
  std::string text = ReadTextFile(path);
  fputs(text.c_str(), stderr);
  std::string last = LastLine(text);
  size_t colon = last.find(": ");
  if (last.rfind("mcdma_bench_link ", 0) == 0 && colon != std::string::npos)
    last = last.substr(colon + 2);
  return last;
}

mcdma::Status CheckSamples(const PairRun& run, const std::vector<SampleSet>& sets) {
  bool complete = sets.size() == run.expect_sets;
  for (const SampleSet& set : sets) complete = complete && set.nanos.size() == run.expect_samples;
  if (complete) return mcdma::Status::Ok();
  return mcdma::Status(mcdma::Code::kInternal, "the client's sample file does not match the plan");
}

}  // namespace

void StopChild(ChildProcess& child, std::chrono::milliseconds grace) {
  if (!child.running()) return;
  std::string name = child.name();
  int status = child.Stop(SIGTERM, grace);
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
    fprintf(stderr, "mcdma_bench_link: %s did not stop within %lld ms of SIGTERM; killed\n",
            name.c_str(), static_cast<long long>(grace.count()));
  } else if (!ExitedCleanly(status) && !(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM)) {
    fprintf(stderr, "mcdma_bench_link: %s ended with %s\n", name.c_str(),
            DescribeWaitStatus(status).c_str());
  }
}

mcdma::Result<std::vector<SampleSet>> RunLinkPair(const LinkPlan& plan, const HostPair& hosts,
                                                  const TempDir& dir, PairRun run) {
  MCDMA_ASSIGN_OR_RETURN(Pipe ready, MakePipe());
  MCDMA_ASSIGN_OR_RETURN(Pipe lifeline, MakePipe());

  std::vector<std::string> server_argv =
      BaseArgs(plan, run.server_role, plan.run_limit_ms + kServerSlackMs);
  server_argv.insert(server_argv.end(),
                     {"--ready-fd", std::to_string(ready.write.get()), "--lifeline-fd",
                      std::to_string(lifeline.read.get()), "--address", hosts.b().address});
  server_argv.insert(server_argv.end(), run.server_args.begin(), run.server_args.end());
  SpawnOptions server_spawn;
  server_spawn.name = run.server_role + " (" + hosts.b().id + ")";
  server_spawn.argv = hosts.On(hosts.b(), server_argv);
  server_spawn.keep_fds = {ready.write.get(), lifeline.read.get()};
  server_spawn.stderr_path = dir.Join(run.key + ".server.stderr");
  MCDMA_ASSIGN_OR_RETURN(ChildProcess server, ChildProcess::Spawn(server_spawn));
  // Our copies go, so the ready pipe reports the server's death as EOF.
  ready.write.Reset();
  lifeline.read.Reset();

  auto said = WaitReadyMessage(ready.read.get(), run.ready_timeout);
  if (!said.ok()) {
    int ws = server.Stop(SIGKILL, std::chrono::seconds(1));
    std::string why = ForwardStderr(server_spawn.stderr_path);
    return mcdma::Status(said.status().code(),
                         run.server_role + " not ready: " + said.status().message() + " (" +
                             DescribeWaitStatus(ws) + (why.empty() ? "" : ": " + why) + ")");
  }

  std::string out = dir.Join(run.key + ".samples");
  std::vector<std::string> client_argv = BaseArgs(plan, run.client_role, plan.run_limit_ms);
  client_argv.insert(client_argv.end(), {"--out", out});
  if (said->size() > 1 && (*said)[0] == 'P') {
    client_argv.insert(client_argv.end(), {"--address", hosts.b().address + ":" + said->substr(1)});
  }
  client_argv.insert(client_argv.end(), run.client_args.begin(), run.client_args.end());
  SpawnOptions client_spawn;
  client_spawn.name = run.client_role + " (" + hosts.a().id + ")";
  client_spawn.argv = hosts.On(hosts.a(), client_argv);
  client_spawn.stderr_path = dir.Join(run.key + ".client.stderr");
  auto client = ChildProcess::Spawn(client_spawn);
  if (!client.ok()) return client.status();  // `server` is killed and reaped on return

  auto client_status = client->Wait(std::chrono::milliseconds(plan.run_limit_ms));
  if (!client_status.ok()) client->Kill();
  std::string client_said = ForwardStderr(client_spawn.stderr_path);
  // The server ends on its own (client EOF or lifeline); one that does not
  // is worth a line, but the client's figures stand.
  lifeline.write.Reset();
  auto server_status = server.Wait(kServerStopGrace);
  if (!server_status.ok()) {
    fprintf(stderr, "mcdma_bench_link: %s did not stop within %lld s; killed\n",
            server_spawn.name.c_str(),
            static_cast<long long>(std::chrono::seconds(kServerStopGrace).count()));
    server.Kill();
  }
  std::string server_said = ForwardStderr(server_spawn.stderr_path);
  if (server_status.ok() && !ExitedCleanly(*server_status)) {
    fprintf(stderr, "mcdma_bench_link: %s ended with %s\n", server_spawn.name.c_str(),
            DescribeWaitStatus(*server_status).c_str());
  }

  if (!client_status.ok()) {
    return mcdma::Status(mcdma::Code::kTimeout, run.client_role + " did not finish within " +
                                                    std::to_string(plan.run_limit_ms / 1000) +
                                                    " s");
  }
  if (!ExitedCleanly(*client_status)) {
    std::string reason = client_said.empty() ? DescribeWaitStatus(*client_status) : client_said;
    if (!server_said.empty()) reason += " (server: " + server_said + ")";
    return mcdma::Status(mcdma::Code::kInternal, run.client_role + " failed: " + reason);
  }
  MCDMA_ASSIGN_OR_RETURN(std::vector<SampleSet> sets, ReadSamples(out));
  MCDMA_RETURN_IF_ERROR(CheckSamples(run, sets));
  return sets;
}

std::string NextTo(const std::string& self, const std::string& relative) {
  return (std::filesystem::path(self).parent_path() / relative).lexically_normal().string();
}

}  // namespace bench
