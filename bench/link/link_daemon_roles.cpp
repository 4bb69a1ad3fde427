// The mechanism under test in mcdma_bench_link: apps on two hosts talking
// through their hosts' daemons and the link between them. The call client
// calls "host-b/bench.echo" (served by harness/daemon_echo.hpp's
// RunDaemonServer on host B); the bulk pair moves a whole exported buffer
// each way.
#include <cstring>
#include <thread>

#include "harness/daemon_echo.hpp"
#include "harness/round_trips.hpp"
#include "link_roles.hpp"
#include "mcdma/client.hpp"

namespace mcdma::bench {

using harness::ConnectWithRetry;
using harness::kEchoService;
using harness::MeasureRoundTrips;
using harness::RunClientPayloads;
using harness::SignalReady;
using harness::WaitForLifeline;
using harness::WriteSamples;

namespace {

// The orchestrator starts clients once the link reports "up", but the
// remote service or export can still lag it by a heartbeat or two; until
// this passes, the first call and the Resolve are retried.
constexpr auto kFirstUseRetry = std::chrono::seconds(30);
constexpr auto kRetryPause = std::chrono::milliseconds(100);

template <typename Attempt>
auto RetryFirstUse(Attempt&& attempt) {
  auto deadline = Clock::now() + kFirstUseRetry;
  for (;;) {
    auto result = attempt();
    if (result.ok() || Clock::now() >= deadline) return result;
    std::this_thread::sleep_for(kRetryPause);
  }
}

mcdma::Status WithContext(const std::string& what, const mcdma::Status& st) {
  return mcdma::Status(st.code(), what + ": " + st.ToString());
}

}  // namespace

int RunDaemonCallClient(const LinkRoleOptions& options) {
  auto client = ConnectWithRetry(options.socket, "mcdma_bench_link-client");
  if (!client.ok()) return FailRole(options, WithContext("Connect", client.status()));
  mcdma::Client& c = **client;
  const std::string service = options.peer + "/" + kEchoService;
  const auto timeout = std::chrono::milliseconds(options.timeout_ms);
  auto first = RetryFirstUse([&] { return c.Call(service, std::string_view("probe"), timeout); });
  if (!first.ok()) return FailRole(options, WithContext("first Call " + service, first.status()));
  auto round_trip = [&](std::span<const std::byte> request) {
    return c.Call(service, request, timeout);
  };
  return RunClientPayloads(options, [&](size_t payload) {
    return MeasureRoundTrips(payload, options.warmup, options.iterations, round_trip);
  });
}

int RunDaemonBulkServer(const LinkRoleOptions& options) {
  auto client = ConnectWithRetry(options.socket, "mcdma_bench_link-export");
  if (!client.ok()) return FailRole(options, WithContext("Connect", client.status()));
  mcdma::Client& c = **client;
  auto buffer = c.Alloc(options.bulk_bytes);
  if (!buffer.ok()) return FailRole(options, WithContext("Alloc", buffer.status()));
  // Touch every page here, as the TCP server does with its buffer, so no
  // timed transfer pays for first faults on this side.
  std::memset(buffer->data(), 0, buffer->size());
  mcdma::ExportOptions export_options;
  export_options.length = options.bulk_bytes;
  export_options.allow_read = true;
  export_options.allow_write = true;
  export_options.allowed_peers = {options.peer};
  mcdma::Status st = c.Export(*buffer, kBulkExport, export_options);
  if (!st.ok()) return FailRole(options, WithContext("Export", st));
  SignalReady(options.ready_fd);
  WaitForLifeline(options.lifeline_fd, std::chrono::milliseconds(options.run_limit_ms));
  client->reset();
  return 0;
}

int RunDaemonBulkClient(const LinkRoleOptions& options) {
  auto client = ConnectWithRetry(options.socket, "mcdma_bench_link-bulk");
  if (!client.ok()) return FailRole(options, WithContext("Connect", client.status()));
  mcdma::Client& c = **client;
  auto local = c.Alloc(options.bulk_bytes);
  if (!local.ok()) return FailRole(options, WithContext("Alloc", local.status()));
  auto remote = RetryFirstUse([&] { return c.Resolve(kBulkExport, options.peer); });
  if (!remote.ok()) {
    return FailRole(options,
                    WithContext(std::string("Resolve ") + kBulkExport + " on " + options.peer,
                                remote.status()));
  }
  if (remote->length < options.bulk_bytes || !remote->readable || !remote->writable) {
    return FailRole(options, mcdma::Status(mcdma::Code::kInternal,
                                           "the resolved export is too short or not read+write"));
  }
  std::vector<mcdma::Transfer> pieces;
  for (uint64_t off = 0; off < options.bulk_bytes; off += options.op_bytes) {
    pieces.push_back(mcdma::Transfer{&*local, off, &*remote, off,
                                     std::min(options.op_bytes, options.bulk_bytes - off)});
  }
  // A whole-buffer batch may take a while on a slow link; the run limit
  // (not the round-trip timeout) bounds it.
  const auto timeout = std::chrono::milliseconds(options.run_limit_ms);
  auto moved = [&](const char* op, const mcdma::Result<uint64_t>& r) -> mcdma::Status {
    if (!r.ok()) return WithContext(op, r.status());
    if (r.value() != options.bulk_bytes) {
      return mcdma::Status(mcdma::Code::kInternal, std::string(op) + " moved " +
                                                       std::to_string(r.value()) + " of " +
                                                       std::to_string(options.bulk_bytes) + " B");
    }
    return mcdma::Status::Ok();
  };
  auto push = [&] { return moved("WriteBatch", c.WriteBatch(pieces, timeout)); };
  auto pull = [&] { return moved("ReadBatch", c.ReadBatch(pieces, timeout)); };
  std::span<std::byte> bytes(local->data(), options.bulk_bytes);
  auto sets = MeasureBulk(bytes, options.repeats, push, pull);
  if (!sets.ok()) return FailRole(options, sets.status());
  (void)c.Release(*remote);
  mcdma::Status st = WriteSamples(options.out, *sets);
  return st.ok() ? 0 : FailRole(options, st);
}

}  // namespace mcdma::bench
