#include "harness/daemon_echo.hpp"

#include <atomic>
#include <cstdio>
#include <thread>

#include "harness/round_trips.hpp"

namespace mcdma::harness {

Result<std::unique_ptr<Client>> ConnectWithRetry(const ClientOptions& options, Millis retry) {
  auto deadline = Clock::now() + retry;
  for (;;) {
    auto client = Client::Connect(options);
    if (client.ok() || Clock::now() >= deadline) return client;
    std::this_thread::sleep_for(Millis(50));
  }
}

Result<std::unique_ptr<Client>> ConnectWithRetry(const std::string& socket,
                                                 const std::string& app_name) {
  ClientOptions options;
  options.socket = socket;
  options.app_name = app_name;
  return ConnectWithRetry(options);
}

int RunDaemonServer(const RoleOptions& options) {
  auto client = ConnectWithRetry(options.socket, options.program + "-server");
  if (!client.ok()) return Fail(options, client.status());
  // The handler runs on the session's progress thread (handler_threads = 0,
  // the lowest-latency setting). A failed Reply is reported once; the
  // caller sees the failure as its own error or timeout.
  static std::atomic<bool> reported{false};
  auto served = (*client)->Serve(kEchoService, [](ServerCall& call) {
    Status st = call.Reply(call.payload());
    if (!st.ok() && !reported.exchange(true)) {
      fprintf(stderr, "bench daemon-server: Reply: %s\n", st.ToString().c_str());
    }
  });
  if (!served.ok()) return Fail(options, served.status());
  SignalReady(options.ready_fd);
  WaitForLifeline(options.lifeline_fd, Millis(options.run_limit_ms));
  client->reset();  // closes the session before exit, as a well-behaved app does
  return 0;
}

int RunDaemonClient(const RoleOptions& options) {
  auto client = ConnectWithRetry(options.socket, options.program + "-client");
  if (!client.ok()) return Fail(options, client.status());
  Client& c = **client;
  auto timeout = Millis(options.timeout_ms);
  auto round_trip = [&](std::span<const std::byte> request) {
    return c.Call(kEchoService, request, timeout);
  };
  return RunClientPayloads(options, [&](size_t payload) {
    return MeasureRoundTrips(payload, options.warmup, options.iterations, round_trip);
  });
}

}  // namespace mcdma::harness
