// mcdma_bench_link: cross-host calls and bulk transfers through two
// mcdma-rpcd daemons and their link, side by side with what two apps could
// use instead (raw TCP, gRPC, ZeroMQ, iperf3), between the same two network
// namespaces in one run. See bench/README.md.
//
// The same binary is every process of the run: without a subcommand it is
// the orchestrator; `child --role R` (hidden) is one endpoint, started by
// the orchestrator under `ip netns exec`. Exit codes: 0 every mechanism
// ran (targets met or not), 1 a mechanism failed, 2 usage.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <map>
#include <thread>

#include "link_cli.hpp"
#include "link_runner.hpp"

namespace {

constexpr size_t kMaxPayload = 16u << 20;

int RunChild(bench::LinkRoleOptions& role) {
  std::map<std::string, bench::LinkRoleFn> roles = bench::DaemonRoles();
  roles.insert({
      {"tcp-server", bench::RunTcpEchoServer},
      {"tcp-client", bench::RunTcpEchoClient},
      {"tcp-spin-server", bench::RunTcpSpinEchoServer},
      {"tcp-spin-client", bench::RunTcpSpinEchoClient},
      {"tcp-relay-server", bench::RunTcpRelayServer},
      {"tcp-relay-client", bench::RunTcpRelayClient},
      {"grpc-tcp-server", bench::RunGrpcTcpServer},
      {"grpc-tcp-client", bench::RunGrpcTcpClient},
      {"zmq-server", bench::RunZmqServer},
      {"zmq-client", bench::RunZmqClient},
      {"tcp-bulk-server", bench::RunTcpBulkServer},
      {"tcp-bulk-client", bench::RunTcpBulkClient},
  });
  return bench::RunLinkRole(role, "mcdma_bench_link", roles);
}

int Main(int argc, char** argv) {
  CLI::App app{
      "Cross-host calls and bulk transfers through two mcdma-rpcd daemons vs raw TCP, gRPC, "
      "ZeroMQ and iperf3, between two network namespaces"};
  app.option_defaults()->always_capture_default();
  bench::LinkOptions options;
  app.add_option("--iterations", options.iterations, "Timed round trips per mechanism and payload")
      ->check(CLI::Range(1, 100000000));
  app.add_option("--warmup", options.warmup, "Untimed round trips before them")
      ->check(CLI::Range(0, 100000000));
  app.add_option("--payloads", options.payloads, "Call payload sizes in bytes, comma-separated")
      ->delimiter(',')
      ->check(CLI::Range(size_t{1}, kMaxPayload));
  app.add_option("--bulk-bytes", options.bulk_bytes, "Bytes per bulk transfer (and buffer size)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{16} << 30));
  app.add_option("--bulk-op-bytes", options.op_bytes,
                 "Bytes per piece of a daemon WriteBatch/ReadBatch")
      ->check(CLI::Range(uint64_t{1}, uint64_t{16} << 30));
  app.add_option("--bulk-repeats", options.repeats,
                 "Timed bulk transfers per direction (after one untimed)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--mechanisms", options.mechanisms, "Which to run: daemon, tcp, grpc, zmq, iperf3")
      ->delimiter(',')
      ->check(CLI::IsMember({"daemon", "tcp", "grpc", "zmq", "iperf3"}));
  app.add_option("--parts", options.parts, "Which parts: calls, bulk")
      ->delimiter(',')
      ->check(CLI::IsMember({"calls", "bulk"}));
  app.add_flag("--loopback", options.loopback,
               "Both hosts on 127.0.0.1 instead of two network namespaces");
  app.add_option("--json", options.json, "Also write the results as JSON to this file");
  app.add_option("--daemon", options.daemon,
                 "mcdma-rpcd binary (default: <bench dir>/../daemon/mcdma-rpcd)");
  app.add_option("--mcdmactl", options.mcdmactl,
                 "mcdmactl binary (default: <bench dir>/../tools/mcdmactl/mcdmactl)");
  app.add_option("--iperf3", options.iperf3, "iperf3 binary (default: iperf3 on PATH)");
  app.add_option("--hosts-script", options.hosts_script, "Network namespace script");
  app.add_option("--daemon-log-level", options.daemon_log_level, "The daemons' --log-level");
  app.add_option("--daemon-arg", options.daemon_args,
                 "One more flag for both daemons, e.g. --daemon-arg=--spin-budget-us=0 "
                 "(repeatable)")
      ->allow_extra_args(false);
  app.add_option("--timeout-ms", options.timeout_ms, "Deadline of one round trip")
      ->check(CLI::Range(1, 600000));
  app.add_option("--run-limit", options.run_limit_s, "Seconds one mechanism's client may run")
      ->check(CLI::Range(1, 86400));
  app.add_option("--link-wait", options.link_wait_s,
                 "Seconds the daemons' link may take to come up")
      ->check(CLI::Range(1, 3600));

  // The endpoint processes; not for people (hidden from --help).
  bench::LinkRoleOptions role;
  CLI::App* child = bench::AddLinkChild(app, role);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  if (child->parsed()) return RunChild(role);

  auto self = bench::SelfExePath();
  if (!self.ok()) {
    fprintf(stderr, "mcdma_bench_link: %s\n", self.status().message().c_str());
    return 1;
  }
  bench::LinkPlan plan = bench::PlanFrom(options, *self);
  plan.iperf3_path = options.iperf3.empty() ? bench::FindInPath("iperf3") : options.iperf3;
  bench::LinkRunInfo info;
  info.cpus = std::thread::hardware_concurrency();
  info.kernel = bench::KernelName();
  return bench::RunLinkBench(options, plan, info);
}

}  // namespace

int main(int argc, char** argv) { return bench::GuardedMain("mcdma_bench_link", Main, argc, argv); }
