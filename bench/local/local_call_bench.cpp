// mcdma_bench_local: the local call round trip through mcdma-rpcd between
// two C++ apps and between two Python apps (python_roles.py), side by
// side with what an app could use instead (raw shared memory, a Unix
// socket, gRPC), in one run. See bench/README.md.
//
// The same binary is every process of the run: without a subcommand it is
// the orchestrator; `child --role R` (hidden) is one endpoint, started by
// the orchestrator with fork + exec. Exit codes: 0 every mechanism ran (and
// the target was met, with --require-target), 1 failure, 2 usage.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <thread>

#include "baselines.hpp"
#include "harness/daemon_echo.hpp"
#include "harness/endpoint.hpp"
#include "harness/files.hpp"
#include "harness/report.hpp"
#include "local_orchestrator.hpp"
#include "local_report.hpp"
#include "shm_pingpong.hpp"

namespace mcdma::bench {
namespace {

constexpr double kTargetFactor = 5.0;        // daemon call vs gRPC unary, at least
constexpr double kPythonTargetFactor = 2.0;  // Python apps vs C++ apps, at most

int RunChild(const harness::RoleOptions& options) {
  static const std::map<std::string, int (*)(const harness::RoleOptions&)> kRoles = {
      {"daemon-server", harness::RunDaemonServer},
      {"daemon-client", harness::RunDaemonClient},
      {"shm-server", RunShmServer},
      {"shm-client", RunShmClient},
      {"uds-server", RunUdsServer},
      {"uds-client", RunUdsClient},
      {"grpc-server", RunGrpcServer},
      {"grpc-client", RunGrpcClient},
  };
  auto it = kRoles.find(options.role);
  if (it == kRoles.end()) {
    fprintf(stderr, "mcdma_bench_local: unknown role '%s'\n", options.role.c_str());
    return 2;
  }
  return it->second(options);
}

// Orchestrator options, each with its default.
struct Options {
  int iterations = 20000;
  int warmup = 2000;
  std::vector<size_t> payloads = {64, 4096};
  std::vector<std::string> mechanisms = {"daemon", "python", "python-queued", "shm", "uds", "grpc"};
  std::string daemon;  // empty: <dir of this binary>/../daemon/mcdma-rpcd
  std::string python = "/usr/bin/python3";
  std::string python_path;  // empty: <dir of this binary>/../bindings/python
  std::string json;         // empty: no JSON file
  int timeout_ms = 5000;
  int run_limit_s = 300;
  bool require_target = false;
};

int RunOrchestrator(const Options& options) {
  auto self = harness::SelfExePath();
  if (!self.ok()) {
    fprintf(stderr, "mcdma_bench_local: %s\n", self.status().message().c_str());
    return 1;
  }
  Plan plan;
  plan.self_exe = *self;
  plan.daemon_path =
      options.daemon.empty() ? harness::NextTo(*self, "../daemon/mcdma-rpcd") : options.daemon;
  plan.python = options.python;
  plan.python_roles = harness::NextTo(*self, "python_roles.py");
  // The Python rows import mcdma from the build tree unless told otherwise.
  std::string python_path = options.python_path.empty()
                                ? harness::NextTo(*self, "../bindings/python")
                                : options.python_path;
  const char* inherited = getenv("PYTHONPATH");
  if (inherited != nullptr && *inherited != '\0') python_path += std::string(":") + inherited;
  setenv("PYTHONPATH", python_path.c_str(), 1);
  plan.payloads = options.payloads;
  plan.iterations = options.iterations;
  plan.warmup = options.warmup;
  plan.timeout_ms = options.timeout_ms;
  plan.run_limit_ms = options.run_limit_s * 1000;

  harness::TempDir dir("mcdma-bench");
  if (!dir.ok()) {
    fprintf(stderr, "mcdma_bench_local: %s\n", dir.error().c_str());
    return 1;
  }

  std::vector<harness::Row> rows;
  bool all_ok = true;
  for (const MechanismInfo& m : AllMechanisms()) {
    if (std::find(options.mechanisms.begin(), options.mechanisms.end(), m.key) ==
        options.mechanisms.end())
      continue;
    fprintf(stderr, "mcdma_bench_local: running %s ...\n", m.key);
    auto sets = RunMechanism(m.mechanism, plan, dir);
    if (!sets.ok()) {
      all_ok = false;
      fprintf(stderr, "mcdma_bench_local: %s failed: %s\n", m.key, sets.status().message().c_str());
    }
    for (size_t i = 0; i < plan.payloads.size(); ++i) {
      harness::Row row;
      row.mechanism = m.key;
      row.label = m.label;
      row.transport = m.transport;
      row.payload = plan.payloads[i];
      row.ok = sets.ok();
      if (row.ok) {
        row.summary = harness::Summarize((*sets)[i].nanos);
      } else {
        row.error = sets.status().message();
      }
      rows.push_back(std::move(row));
    }
  }
  // Group by payload so each block reads as one comparison.
  std::stable_sort(rows.begin(), rows.end(), [](const harness::Row& a, const harness::Row& b) {
    return a.payload < b.payload;
  });

  printf("local call round trip: %d round trips per row after %d warm-up, %u CPUs, %s\n",
         plan.iterations, plan.warmup, std::thread::hardware_concurrency(),
         harness::KernelName().c_str());
  harness::PrintCallTable(stdout, rows, "daemon", 34);
  std::vector<harness::Verdict> verdicts;
  auto wanted = [&](const char* key) {
    return std::find(options.mechanisms.begin(), options.mechanisms.end(), key) !=
           options.mechanisms.end();
  };
  if (wanted("daemon") && wanted("grpc")) {
    verdicts.push_back(EvaluateTarget(rows, plan.payloads,
                                      {"daemon", "grpc", kTargetFactor, false,
                                       "daemon call p50 at least 5x faster than gRPC unary p50"}));
  }
  if (wanted("daemon") && wanted("python")) {
    verdicts.push_back(
        EvaluateTarget(rows, plan.payloads,
                       {"daemon", "python", kPythonTargetFactor, true,
                        "Python apps' call p50 (inline handler) at most 2x the C++ apps' p50"}));
  }
  for (const harness::Verdict& v : verdicts) printf("%s\n", v.line.c_str());
  fflush(stdout);
  const bool all_met = std::all_of(verdicts.begin(), verdicts.end(),
                                   [](const harness::Verdict& v) { return v.met; });

  if (!options.json.empty()) {
    mcdma::Status st = WriteJson(options.json, plan, rows, "daemon", verdicts);
    if (!st.ok()) {
      fprintf(stderr, "mcdma_bench_local: %s\n", st.message().c_str());
      return 1;
    }
  }
  if (!all_ok) return 1;
  return options.require_target && !all_met ? 1 : 0;
}

int Main(int argc, char** argv) {
  CLI::App app{"Local call round trip through mcdma-rpcd vs shared memory, a Unix socket and gRPC"};
  app.option_defaults()->always_capture_default();
  Options options;
  harness::AddRoundTripOptions(app, options.iterations, options.warmup, options.payloads);
  app.add_option("--mechanisms", options.mechanisms,
                 "Which to run: daemon, python, python-queued, shm, uds, grpc")
      ->delimiter(',')
      ->check(CLI::IsMember({"daemon", "python", "python-queued", "shm", "uds", "grpc"}));
  app.add_option("--daemon", options.daemon,
                 "mcdma-rpcd binary (default: <bench dir>/../daemon/mcdma-rpcd)");
  app.add_option("--python", options.python, "Interpreter of the Python rows");
  app.add_option(
      "--python-path", options.python_path,
      "Where the Python rows import mcdma from (default: <bench dir>/../bindings/python)");
  app.add_option("--json", options.json, "Also write the results as JSON to this file");
  app.add_option("--timeout-ms", options.timeout_ms, "Deadline of one round trip")
      ->check(CLI::Range(1, 600000));
  app.add_option("--run-limit", options.run_limit_s, "Seconds one mechanism's client may run")
      ->check(CLI::Range(1, 86400));
  app.add_flag("--require-target", options.require_target,
               "Exit 1 when a target (5x gRPC, 2x for Python) is not met");

  // The endpoint processes; not for people (hidden from --help).
  harness::RoleOptions role;
  CLI::App* child = harness::AddChildCommand(app, role);
  if (std::optional<int> done = harness::ParseCommandLine(app, argc, argv)) return *done;
  if (child->parsed()) return RunChild(role);
  return RunOrchestrator(options);
}

}  // namespace
}  // namespace mcdma::bench

int main(int argc, char** argv) {
  return mcdma::harness::GuardedMain("mcdma_bench_local", mcdma::bench::Main, argc, argv);
}
