#include "daemon_path.hpp"

#include <atomic>
#include <cstdio>
#include <thread>

#include "mcdma/client.hpp"

namespace bench {

// The daemon is "ready" only once a session opens, which can lag the socket
// file appearing; until kConnectRetry passes every failure is retried.
mcdma::Result<std::unique_ptr<mcdma::Client>> ConnectWithRetry(const RoleOptions& options,
                                                               const char* app_name) {
  mcdma::ClientOptions client_options;
  client_options.socket = options.socket;
  client_options.app_name = app_name;
  auto deadline = Clock::now() + kConnectRetry;
  for (;;) {
    auto client = mcdma::Client::Connect(client_options);
    if (client.ok() || Clock::now() >= deadline) return client;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

int RunDaemonServer(const RoleOptions& options) {
  auto client = ConnectWithRetry(options, "mcdma_bench_local-server");
  if (!client.ok()) return Fail(options, client.status());
  // The handler runs on the session's progress thread (handler_threads = 0,
  // the lowest-latency setting). A failed Reply is reported once; the
  // caller sees the failure as its own error or timeout.
  static std::atomic<bool> reported{false};
  auto served = (*client)->Serve(kEchoService, [](mcdma::ServerCall& call) {
    mcdma::Status st = call.Reply(call.payload());
    if (!st.ok() && !reported.exchange(true)) {
      fprintf(stderr, "bench daemon-server: Reply: %s\n", st.ToString().c_str());
    }
  });
  if (!served.ok()) return Fail(options, served.status());
  SignalReady(options.ready_fd);
  WaitForLifeline(options.lifeline_fd, std::chrono::milliseconds(options.run_limit_ms));
  client->reset();  // closes the session before exit, as a well-behaved app does
  return 0;
}

int RunDaemonClient(const RoleOptions& options) {
  auto client = ConnectWithRetry(options, "mcdma_bench_local-client");
  if (!client.ok()) return Fail(options, client.status());
  mcdma::Client& c = **client;
  auto timeout = std::chrono::milliseconds(options.timeout_ms);
  auto round_trip = [&](std::span<const std::byte> request) {
    return c.Call(kEchoService, request, timeout);
  };
  return RunClientPayloads(options, [&](size_t payload) {
    return MeasureRoundTrips(payload, options.warmup, options.iterations, round_trip);
  });
}

}  // namespace bench
