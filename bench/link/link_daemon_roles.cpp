// The mechanism under test in mcdma_bench_link: apps on two hosts talking
// through their hosts' daemons and the link between them. The call client
// calls "host-b/bench.echo" (served by harness/daemon_echo.hpp's
// RunDaemonServer on host B); the bulk pair moves a whole exported buffer
// each way.
#include <cstring>
#include <memory>
#include <thread>

#include "harness/daemon_echo.hpp"
#include "harness/files.hpp"
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
  // No peer: the service on this client's own daemon (a local call).
  const std::string service =
      options.peer.empty() ? std::string(kEchoService) : options.peer + "/" + kEchoService;
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

namespace {

// A bulk client's side: its connection, its buffer, the peer's export and
// the whole-buffer transfer in op_bytes pieces.
struct BulkSession {
  std::unique_ptr<mcdma::Client> client;
  mcdma::Buffer local;
  mcdma::RemoteBuffer remote;
  std::vector<mcdma::Transfer> pieces;
};

// Fills `s` (which the pieces point into: it must not move afterwards).
mcdma::Status OpenBulkSession(const LinkRoleOptions& options, BulkSession& s) {
  auto client = ConnectWithRetry(options.socket, "mcdma_bench_link-bulk");
  if (!client.ok()) return WithContext("Connect", client.status());
  s.client = std::move(*client);
  mcdma::Client& c = *s.client;
  auto local = c.Alloc(options.bulk_bytes);
  if (!local.ok()) return WithContext("Alloc", local.status());
  s.local = std::move(*local);
  auto remote = RetryFirstUse([&] { return c.Resolve(kBulkExport, options.peer); });
  if (!remote.ok()) {
    return WithContext(std::string("Resolve ") + kBulkExport + " on " + options.peer,
                       remote.status());
  }
  s.remote = std::move(*remote);
  if (s.remote.length < options.bulk_bytes || !s.remote.readable || !s.remote.writable) {
    return mcdma::Status(mcdma::Code::kInternal,
                         "the resolved export is too short or not read+write");
  }
  for (uint64_t off = 0; off < options.bulk_bytes; off += options.op_bytes) {
    s.pieces.push_back(mcdma::Transfer{&s.local, off, &s.remote, off,
                                       std::min(options.op_bytes, options.bulk_bytes - off)});
  }
  return mcdma::Status::Ok();
}

// WriteBatch or ReadBatch of the whole buffer; all of it must move. A
// whole-buffer batch may take a while on a slow link; the run limit (not
// the round-trip timeout) bounds it.
mcdma::Status MoveAll(const LinkRoleOptions& options, BulkSession& s, bool write) {
  const auto timeout = std::chrono::milliseconds(options.run_limit_ms);
  const char* op = write ? "WriteBatch" : "ReadBatch";
  mcdma::Result<uint64_t> r =
      write ? s.client->WriteBatch(s.pieces, timeout) : s.client->ReadBatch(s.pieces, timeout);
  if (!r.ok()) return WithContext(op, r.status());
  if (r.value() != options.bulk_bytes) {
    return mcdma::Status(mcdma::Code::kInternal, std::string(op) + " moved " +
                                                     std::to_string(r.value()) + " of " +
                                                     std::to_string(options.bulk_bytes) + " B");
  }
  return mcdma::Status::Ok();
}

}  // namespace

int RunDaemonBulkClient(const LinkRoleOptions& options) {
  BulkSession s;
  mcdma::Status opened = OpenBulkSession(options, s);
  if (!opened.ok()) return FailRole(options, opened);
  auto push = [&] { return MoveAll(options, s, true); };
  auto pull = [&] { return MoveAll(options, s, false); };
  std::span<std::byte> bytes(s.local.data(), options.bulk_bytes);
  auto sets = MeasureBulk(bytes, options.repeats, push, pull);
  if (!sets.ok()) return FailRole(options, sets.status());
  (void)s.client->Release(s.remote);
  mcdma::Status st = WriteSamples(options.out, *sets);
  return st.ok() ? 0 : FailRole(options, st);
}

int RunDaemonCutClient(const LinkRoleOptions& options) {
  BulkSession s;
  mcdma::Status opened = OpenBulkSession(options, s);
  if (!opened.ok()) return FailRole(options, opened);
  std::span<std::byte> bytes(s.local.data(), options.bulk_bytes);
  // A round number no MeasureBulk round uses: stale bytes of an earlier
  // run in the export cannot pass the check.
  constexpr uint64_t kRound = 0xC0FFEE;
  FillBulkPattern(bytes, kRound);
  auto ns = [](Clock::time_point t0) {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
  };
  mcdma::Status st = harness::WriteFile(options.marker, "write\n");
  if (!st.ok()) return FailRole(options, st);
  auto t0 = Clock::now();
  st = MoveAll(options, s, true);
  uint64_t write_ns = ns(t0);
  if (!st.ok()) return FailRole(options, st);
  std::fill(bytes.begin(), bytes.end(), std::byte{0});
  t0 = Clock::now();
  st = MoveAll(options, s, false);
  uint64_t read_ns = ns(t0);
  if (!st.ok()) return FailRole(options, st);
  st = CheckBulkPattern(bytes, kRound);
  if (!st.ok()) return FailRole(options, st);
  (void)s.client->Release(s.remote);
  std::vector<SampleSet> sets = {{options.bulk_bytes, {write_ns}}, {options.bulk_bytes, {read_ns}}};
  st = WriteSamples(options.out, sets);
  return st.ok() ? 0 : FailRole(options, st);
}

}  // namespace mcdma::bench
