#include "link_iperf.hpp"

#include <signal.h>

#include <cstdlib>
#include <thread>

#include "harness/child.hpp"

namespace mcdma::bench {

namespace {

using harness::Millis;

constexpr uint16_t kIperfPort = 5201;
constexpr Millis kServerWait(5000);
constexpr Millis kServerStopGrace(3000);
constexpr int kBusyRetries = 5;

// One client run; its receiving side's rate in GB/s.
Result<double> RunClient(const LinkPlan& plan, const harness::Hosts& hosts, uint16_t port,
                         bool reverse) {
  std::vector<std::string> argv = {plan.iperf3_path,
                                   "-c",
                                   hosts[1].address,
                                   "-p",
                                   std::to_string(port),
                                   "-n",
                                   std::to_string(plan.bulk_bytes),
                                   "-J"};
  if (reverse) argv.push_back("-R");
  std::string text;
  for (int attempt = 0; attempt < kBusyRetries; ++attempt) {
    harness::CommandResult r =
        harness::RunCommand(hosts.On(hosts[0], argv), Millis(plan.run_limit_ms));
    if (!r.status) {
      return Status(Code::kTimeout, "iperf3 did not finish within " +
                                        std::to_string(plan.run_limit_ms / 1000) + " s");
    }
    text = r.out;
    if (r.exit_code() == 0) break;
    // The server takes a moment to be ready for the next test after one ends.
    if (text.find("busy") == std::string::npos) break;
    std::this_thread::sleep_for(Millis(200));
  }
  size_t error = text.find("\"error\"");
  if (error != std::string::npos) {
    size_t open = text.find('"', text.find(':', error));
    size_t close = text.find('"', open + 1);
    return Status(Code::kInternal, "iperf3: " + text.substr(open + 1, close - open - 1));
  }
  size_t sum = text.find("\"sum_received\"");
  size_t bps = sum == std::string::npos ? sum : text.find("\"bits_per_second\"", sum);
  if (bps == std::string::npos) {
    return Status(Code::kInternal, "iperf3 printed no sum_received rate");
  }
  double bits = strtod(text.c_str() + text.find(':', bps) + 1, nullptr);
  return bits / 8 / 1e9;
}

}  // namespace

Result<IperfRates> RunIperf(const LinkPlan& plan, const harness::Hosts& hosts,
                            const harness::TempDir& dir) {
  MCDMA_ASSIGN_OR_RETURN(uint16_t port, hosts.Port(kIperfPort));
  harness::SpawnOptions server_spawn =
      harness::LoggedSpawn("iperf3 -s (" + hosts[1].id + ")", dir.Join("iperf-server.stderr"));
  server_spawn.stdout_path = dir.Join("iperf-server.out");
  MCDMA_ASSIGN_OR_RETURN(
      std::unique_ptr<harness::Child> server,
      harness::Child::Spawn(hosts.On(hosts[1], {plan.iperf3_path, "-s", "--forceflush", "-B",
                                                hosts[1].address, "-p", std::to_string(port)}),
                            server_spawn));
  auto deadline = harness::Clock::now() + kServerWait;
  while (harness::ReadFile(server_spawn.stdout_path).find("listening") == std::string::npos) {
    if (server->WaitExit(Millis(20)) || harness::Clock::now() >= deadline) {
      return Status(Code::kUnavailable,
                    "iperf3 -s did not start: " +
                        harness::LastLine(harness::ReadFile(server_spawn.stderr_path) +
                                          harness::ReadFile(server_spawn.stdout_path)));
    }
  }
  IperfRates rates;
  for (int i = 0; i < plan.repeats; ++i) {
    MCDMA_ASSIGN_OR_RETURN(double forward, RunClient(plan, hosts, port, false));
    rates.a_to_b_gbps.push_back(forward);
    MCDMA_ASSIGN_OR_RETURN(double reverse, RunClient(plan, hosts, port, true));
    rates.b_to_a_gbps.push_back(reverse);
  }
  // iperf3 exits 1 on SIGTERM ("the server has terminated"): not worth a line.
  (void)server->Stop(SIGTERM, kServerStopGrace);
  return rates;
}

}  // namespace mcdma::bench
