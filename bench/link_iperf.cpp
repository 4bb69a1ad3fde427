#include "link_iperf.hpp"

#include <signal.h>

#include <cstdlib>
#include <thread>

namespace bench {

namespace {

constexpr uint16_t kIperfPort = 5201;
constexpr auto kServerWait = std::chrono::seconds(5);
constexpr auto kServerStopGrace = std::chrono::seconds(3);
constexpr int kBusyRetries = 5;

// One client run; its receiving side's rate in GB/s.
mcdma::Result<double> RunClient(const LinkPlan& plan, const HostPair& hosts, const TempDir& dir,
                                uint16_t port, bool reverse) {
  std::vector<std::string> argv = {plan.iperf3_path,
                                   "-c",
                                   hosts.b().address,
                                   "-p",
                                   std::to_string(port),
                                   "-n",
                                   std::to_string(plan.bulk_bytes),
                                   "-J"};
  if (reverse) argv.push_back("-R");
  std::string out = dir.Join("iperf-client.json");
  std::string text;
  for (int attempt = 0; attempt < kBusyRetries; ++attempt) {
    MCDMA_ASSIGN_OR_RETURN(
        int status, RunCommand(hosts.On(hosts.a(), argv), out, dir.Join("iperf-client.stderr"),
                               std::chrono::milliseconds(plan.run_limit_ms)));
    text = ReadTextFile(out);
    if (ExitCode(status) == 0) break;
    // The server takes a moment to be ready for the next test after one ends.
    if (text.find("busy") == std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  size_t error = text.find("\"error\"");
  if (error != std::string::npos) {
    size_t open = text.find('"', text.find(':', error));
    size_t close = text.find('"', open + 1);
    return mcdma::Status(mcdma::Code::kInternal,
                         "iperf3: " + text.substr(open + 1, close - open - 1));
  }
  size_t sum = text.find("\"sum_received\"");
  size_t bps = sum == std::string::npos ? sum : text.find("\"bits_per_second\"", sum);
  if (bps == std::string::npos)
    return mcdma::Status(mcdma::Code::kInternal, "iperf3 printed no sum_received rate");
  double bits = strtod(text.c_str() + text.find(':', bps) + 1, nullptr);
  return bits / 8 / 1e9;
}

}  // namespace

mcdma::Result<IperfRates> RunIperf(const LinkPlan& plan, const HostPair& hosts,
                                   const TempDir& dir) {
  MCDMA_ASSIGN_OR_RETURN(uint16_t port, hosts.Port(kIperfPort));
  SpawnOptions server_spawn;
  server_spawn.name = "iperf3 -s (" + hosts.b().id + ")";
  server_spawn.argv = hosts.On(hosts.b(), {plan.iperf3_path, "-s", "--forceflush", "-B",
                                           hosts.b().address, "-p", std::to_string(port)});
  std::string server_out = dir.Join("iperf-server.out");
  server_spawn.stdout_path = server_out;
  server_spawn.stderr_path = dir.Join("iperf-server.stderr");
  MCDMA_ASSIGN_OR_RETURN(ChildProcess server, ChildProcess::Spawn(server_spawn));
  auto deadline = Clock::now() + kServerWait;
  while (ReadTextFile(server_out).find("listening") == std::string::npos) {
    auto exited = server.Wait(std::chrono::milliseconds(20));
    if (exited.ok() || Clock::now() >= deadline) {
      return mcdma::Status(
          mcdma::Code::kUnavailable,
          "iperf3 -s did not start: " +
              LastLine(ReadTextFile(server_spawn.stderr_path) + ReadTextFile(server_out)));
    }
  }
  IperfRates rates;
  for (int i = 0; i < plan.repeats; ++i) {
    MCDMA_ASSIGN_OR_RETURN(double forward, RunClient(plan, hosts, dir, port, false));
    rates.a_to_b_gbps.push_back(forward);
    MCDMA_ASSIGN_OR_RETURN(double reverse, RunClient(plan, hosts, dir, port, true));
    rates.b_to_a_gbps.push_back(reverse);
  }
  // iperf3 exits 1 on SIGTERM ("the server has terminated"): not worth a line.
  (void)server.Stop(SIGTERM, kServerStopGrace);
  return rates;
}

}  // namespace bench
