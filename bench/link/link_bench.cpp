// mcdma_bench_link: cross-host calls and bulk transfers through two
// mcdma-rpcd daemons and their link, side by side with what two apps could
// use instead (raw TCP, gRPC, ZeroMQ, iperf3), between the same two network
// namespaces in one run. See bench/README.md.
//
// The same binary is every process of the run: without a subcommand it is
// the orchestrator; `rails` is the rails mode (link_rails.hpp), `relay`
// the relay mode (link_relay.hpp); `child
// --role R` (hidden) is one endpoint, started by the orchestrator under
// `ip netns exec`. Exit codes: 0 every mechanism ran (targets met or not),
// 1 a mechanism failed, 2 usage; `rails` and `relay` also 77: no
// namespaces here.
#include <CLI/CLI.hpp>
#include <map>
#include <optional>
#include <thread>

#include "harness/endpoint.hpp"
#include "harness/files.hpp"
#include "link_cli.hpp"
#include "link_rails.hpp"
#include "link_relay.hpp"
#include "link_runner.hpp"

namespace mcdma::bench {
namespace {

int RunChild(LinkRoleOptions& role) {
  std::map<std::string, LinkRoleFn> roles = DaemonRoles();
  roles.insert({
      {"tcp-server", RunTcpEchoServer},
      {"tcp-client", RunTcpEchoClient},
      {"tcp-spin-server", RunTcpSpinEchoServer},
      {"tcp-spin-client", RunTcpSpinEchoClient},
      {"tcp-relay-server", RunTcpRelayServer},
      {"tcp-relay-client", RunTcpRelayClient},
      {"grpc-tcp-server", RunGrpcTcpServer},
      {"grpc-tcp-client", RunGrpcTcpClient},
      {"zmq-server", RunZmqServer},
      {"zmq-client", RunZmqClient},
      {"tcp-bulk-server", RunTcpBulkServer},
      {"tcp-bulk-client", RunTcpBulkClient},
      {"tcp-rails-server", RunTcpRailsServer},
      {"tcp-rails-client", RunTcpRailsClient},
      {"rails-cut-client", RunDaemonCutClient},
  });
  return RunLinkRole(role, "mcdma_bench_link", roles);
}

int Main(int argc, char** argv) {
  CLI::App app{
      "Cross-host calls and bulk transfers through two mcdma-rpcd daemons vs raw TCP, gRPC, "
      "ZeroMQ and iperf3, between two network namespaces"};
  app.option_defaults()->always_capture_default();
  LinkOptions options;
  AddPlanOptions(app, options, BulkLimits{});
  app.add_option("--mechanisms", options.mechanisms, "Which to run: daemon, tcp, grpc, zmq, iperf3")
      ->delimiter(',')
      ->check(CLI::IsMember({"daemon", "tcp", "grpc", "zmq", "iperf3"}));
  app.add_option("--parts", options.parts, "Which parts: calls, bulk")
      ->delimiter(',')
      ->check(CLI::IsMember({"calls", "bulk"}));
  app.add_flag("--loopback", options.loopback,
               "Both hosts on 127.0.0.1 instead of two network namespaces");
  app.add_option("--json", options.json, "Also write the results as JSON to this file");
  app.add_option("--iperf3", options.iperf3, "iperf3 binary (default: iperf3 on PATH)");
  app.add_option("--hosts-script", options.hosts_script, "Network namespace script");

  // `rails`: the link striped over 1..N rate-limited rails (link_rails.hpp).
  RailsOptions rails_options;
  CLI::App* rails = AddRailsCommand(app, rails_options);
  // `relay`: 0, 1, 2 relays of a line of rate-limited cables (link_relay.hpp).
  RelayOptions relay_options;
  CLI::App* relay = AddRelayCommand(app, relay_options);

  // The endpoint processes; not for people (hidden from --help).
  LinkRoleOptions role;
  CLI::App* child = AddLinkChild(app, role);
  if (std::optional<int> done = harness::ParseCommandLine(app, argc, argv)) return *done;
  if (child->parsed()) return RunChild(role);

  auto self = harness::SelfExePath();
  if (!self.ok()) {
    fprintf(stderr, "mcdma_bench_link: %s\n", self.status().message().c_str());
    return 1;
  }
  if (rails->parsed()) return RunRailsBench(rails_options, *self);
  if (relay->parsed()) return RunRelayBench(relay_options, *self);
  LinkPlan plan = PlanFrom(options, *self);
  plan.iperf3_path = options.iperf3.empty() ? harness::FindInPath("iperf3") : options.iperf3;
  return RunLinkBench(options, plan);
}

}  // namespace
}  // namespace mcdma::bench

int main(int argc, char** argv) {
  return mcdma::harness::GuardedMain("mcdma_bench_link", mcdma::bench::Main, argc, argv);
}
