#include "verbs_perftest.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "harness/child.hpp"
#include "harness/files.hpp"
#include "perftest_output.hpp"

namespace mcdma::bench {

namespace {

using harness::Clock;
using harness::LastLines;
using harness::ReadFile;

constexpr auto kListenWait = std::chrono::seconds(30);
constexpr auto kServerFinish = std::chrono::seconds(10);
constexpr int kTailLines = 4;

std::string Tail(const std::string& path) {
  std::string tail = LastLines(ReadFile(path), kTailLines);
  while (!tail.empty() && tail.back() == '\n') tail.pop_back();
  for (char& c : tail) c = c == '\n' ? '/' : c;
  return tail;
}

std::vector<std::string> EndArgs(const std::string& tool, const VerbsHost& host,
                                 const std::vector<std::string>& args, uint16_t port) {
  std::vector<std::string> argv = {
      tool, "-d", host.device, "-x", std::to_string(host.gid_index), "-p", std::to_string(port)};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

}  // namespace

mcdma::Result<PerftestOutput> RunPerftest(const VerbsPlan& plan, const PerftestRun& run,
                                          uint16_t port) {
  const VerbsOptions& o = plan.options;
  const std::string tool = plan.perftest_dir + "/" + run.tool;
  const std::string log_base = o.out + "/logs/" + run.name;
  // Both ends' output stays in the logs; this process's stdin is theirs.
  auto end_spawn = [&](const std::string& name, const std::string& side) {
    harness::SpawnOptions spawn = harness::LoggedSpawn(name, log_base + "." + side + ".stderr");
    spawn.stdout_path = log_base + "." + side + ".log";
    return spawn;
  };
  const harness::SpawnOptions server_spawn =
      end_spawn(run.tool + " server (" + o.b.device + ")", "server");
  MCDMA_ASSIGN_OR_RETURN(std::unique_ptr<harness::Child> server,
                         harness::Child::Spawn(EndArgs(tool, o.b, run.args, port), server_spawn));

  auto deadline = Clock::now() + kListenWait;
  while (!perftest::Listening(port)) {
    if (auto ended = server->WaitExit(harness::Millis(0))) {
      return mcdma::Status(
          mcdma::Code::kInternal,
          server_spawn.name + " ended before it listened (" + harness::DescribeStatus(*ended) +
              "): " + Tail(server_spawn.stdout_path) + " " + Tail(server_spawn.stderr_path));
    }
    if (Clock::now() >= deadline) {
      return mcdma::Status(mcdma::Code::kTimeout, server_spawn.name + " not listening on port " +
                                                      std::to_string(port) + " within " +
                                                      std::to_string(kListenWait.count()) + " s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }

  std::vector<std::string> client_argv = EndArgs(tool, o.a, run.args, port);
  client_argv.push_back(o.b.address);
  const harness::SpawnOptions client_spawn =
      end_spawn(run.tool + " client (" + o.a.device + ")", "client");
  auto t0 = Clock::now();
  MCDMA_ASSIGN_OR_RETURN(std::unique_ptr<harness::Child> client,
                         harness::Child::Spawn(client_argv, client_spawn));
  auto client_status = client->WaitExit(std::chrono::seconds(plan.options.perftest_limit_s));
  if (!client_status) client->Kill();
  double wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  auto server_status = server->WaitExit(kServerFinish);
  if (!server_status) server->Kill();
  const std::string what = run.tool + " " + run.name;
  if (!client_status) {
    return mcdma::Status(mcdma::Code::kTimeout,
                         what + ": client: did not finish within " +
                             std::to_string(plan.options.perftest_limit_s) +
                             " s; client said: " + Tail(client_spawn.stdout_path) +
                             "; server said: " + Tail(server_spawn.stdout_path));
  }
  if (harness::ExitCode(*client_status) != 0) {
    return mcdma::Status(mcdma::Code::kInternal,
                         what + ": client " + harness::DescribeStatus(*client_status) + ": " +
                             Tail(client_spawn.stdout_path) + " " + Tail(client_spawn.stderr_path) +
                             "; server said: " + Tail(server_spawn.stdout_path) + " " +
                             Tail(server_spawn.stderr_path));
  }
  if (!server_status || harness::ExitCode(*server_status) != 0) {
    return mcdma::Status(mcdma::Code::kInternal,
                         what + ": server " +
                             (server_status ? harness::DescribeStatus(*server_status)
                                            : std::string("did not finish; killed")) +
                             ": " + Tail(server_spawn.stdout_path) + " " +
                             Tail(server_spawn.stderr_path));
  }
  return PerftestOutput{ReadFile(client_spawn.stdout_path), ReadFile(client_spawn.stderr_path),
                        wall_s};
}

std::string ClockSamplingFailure(const PerftestOutput& out) {
  return perftest::ClockSamplingFailure(out.text, out.errors);
}

std::string CpuRateConflict(const PerftestOutput& out) {
  return perftest::CpuRateConflict(out.text, out.errors);
}

}  // namespace mcdma::bench
