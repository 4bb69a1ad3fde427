// The endpoint processes of mcdma_bench_link. Every server runs on host B
// and every client on host A (harness/hosts.hpp); each is this binary
// re-executed as `child --role R` inside its host's network namespace.
// Every role returns a process exit code: 0 ok, 1 failure (the reason on
// stderr, prefixed "mcdma_bench_link <role>: ").
//
// Servers that listen on TCP bind port 0 on their host's address and send
// the port the kernel chose down the ready pipe (SignalReadyPort); the
// orchestrator hands it to the client as --address HOST:PORT.
//
// Round-trip clients write one sample set per payload (harness/latency.hpp). Bulk
// clients write two sets whose `payload` is the transfer size: first the
// A -> B transfers (write), then the B -> A ones (read), one sample (ns)
// per timed transfer.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "harness/child.hpp"
#include "harness/endpoint.hpp"
#include "harness/latency.hpp"

namespace mcdma::bench {

using harness::Clock;
using harness::RoleOptions;
using harness::SampleSet;

struct LinkRoleOptions : RoleOptions {
  // Servers: the host address to listen on. Clients: HOST:PORT to reach.
  std::string address;
  // Daemon call and bulk clients: the peer's host id ("host-b"). Daemon
  // bulk server: the host allowed to resolve its export ("host-a").
  std::string peer;
  uint64_t bulk_bytes = 0;  // bulk: bytes per transfer (and buffer size)
  uint64_t op_bytes = 0;    // daemon bulk: bytes per batched piece
  int repeats = 0;          // bulk: timed transfers per direction
  // Raw TCP over rails (rails mode): the server's rail addresses
  // ("10.241.5.2"), the client's pairs ("10.241.5.1>10.241.5.2"), in rail
  // order; stream K binds and connects over rail K.
  std::vector<std::string> rails;
  // Daemon cut client (rails mode): created just before the timed WriteBatch.
  std::string marker;
};

// The export the daemon bulk server offers.
inline constexpr char kBulkExport[] = "bench.bulk";

// Raw TCP ping-pong: u32 length + payload frames, TCP_NODELAY, blocking.
int RunTcpEchoServer(const LinkRoleOptions& options);
int RunTcpEchoClient(const LinkRoleOptions& options);
int RunTcpSpinEchoServer(const LinkRoleOptions& options);
int RunTcpSpinEchoClient(const LinkRoleOptions& options);
// The spinning ping-pong through one relay process per host, the shape of
// any per-host daemon design: client -> (Unix socket) -> relay on A ->
// (TCP) -> relay on B -> (Unix socket) -> echo server, every read spinning
// then blocking. Each role forks its second process.
int RunTcpRelayServer(const LinkRoleOptions& options);
int RunTcpRelayClient(const LinkRoleOptions& options);
// gRPC unary echo (bench/baselines/echo.proto) over TCP.
int RunGrpcTcpServer(const LinkRoleOptions& options);
int RunGrpcTcpClient(const LinkRoleOptions& options);
// ZeroMQ REQ/REP over TCP (kHaveZmq false: both fail with a reason).
extern const bool kHaveZmq;
int RunZmqServer(const LinkRoleOptions& options);
int RunZmqClient(const LinkRoleOptions& options);
// Raw single-stream TCP bulk: the client pushes bulk_bytes (A -> B, timed
// to the server's 1-byte acknowledgement) and pulls them back (B -> A).
int RunTcpBulkServer(const LinkRoleOptions& options);
int RunTcpBulkClient(const LinkRoleOptions& options);

// Through the daemons. The echo server is harness/daemon_echo.hpp's
// RunDaemonServer (serves "bench.echo" on host B's daemon); the call client
// calls "<peer>/bench.echo" through host A's daemon (without a peer:
// "bench.echo" on the daemon it is given, a call that crosses no link).
int RunDaemonCallClient(const LinkRoleOptions& options);
// Exports a bulk_bytes buffer as kBulkExport, readable and writable by
// `peer`, and keeps it until the lifeline closes.
int RunDaemonBulkServer(const LinkRoleOptions& options);
// Resolves `peer`'s kBulkExport and times whole-buffer WriteBatch and
// ReadBatch calls (pieces of op_bytes).
int RunDaemonBulkClient(const LinkRoleOptions& options);

// Rails mode (link_rails.hpp). Raw TCP, one stream per rail: the server
// listens on kRailsTcpPort of every rail address it is given; the client
// connects one stream per rail pair and moves bulk_bytes in equal parts,
// all streams at once, A -> B then B -> A (MeasureBulk's rounds).
inline constexpr uint16_t kRailsTcpPort = 5302;
int RunTcpRailsServer(const LinkRoleOptions& options);
int RunTcpRailsClient(const LinkRoleOptions& options);
// Through the daemons, against RunDaemonBulkServer: one byte-verified
// round (fill, WriteBatch, zero, ReadBatch, check) with `marker` created
// just before the WriteBatch, so the orchestrator can cut a rail in the
// middle of it. One sample per direction.
int RunDaemonCutClient(const LinkRoleOptions& options);

// Shared by the bulk clients: one untimed round, then `repeats` timed
// rounds of: fill `local` with a pattern unique to the round, push();
// zero `local`, pull(); check `local` holds the pattern again. Returns the
// {A -> B, B -> A} sample sets.
template <typename Push, typename Pull>
Result<std::vector<SampleSet>> MeasureBulk(std::span<std::byte> local, int repeats, Push&& push,
                                           Pull&& pull);
void FillBulkPattern(std::span<std::byte> buf, uint64_t round);
mcdma::Status CheckBulkPattern(std::span<const std::byte> buf, uint64_t round);
// Prints "mcdma_bench_link <role>: <status>" and returns 1.
int FailRole(const RoleOptions& options, const mcdma::Status& status);

template <typename Push, typename Pull>
Result<std::vector<SampleSet>> MeasureBulk(std::span<std::byte> local, int repeats, Push&& push,
                                           Pull&& pull) {
  std::vector<SampleSet> sets = {{local.size(), {}}, {local.size(), {}}};
  auto ns = [](Clock::time_point t0) {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
  };
  for (int round = 0; round <= repeats; ++round) {
    FillBulkPattern(local, static_cast<uint64_t>(round));
    auto t0 = Clock::now();
    MCDMA_RETURN_IF_ERROR(push());
    uint64_t push_ns = ns(t0);
    std::fill(local.begin(), local.end(), std::byte{0});
    t0 = Clock::now();
    MCDMA_RETURN_IF_ERROR(pull());
    uint64_t pull_ns = ns(t0);
    MCDMA_RETURN_IF_ERROR(CheckBulkPattern(local, static_cast<uint64_t>(round)));
    if (round == 0) continue;  // warm-up: faults in every page on both sides
    sets[0].nanos.push_back(push_ns);
    sets[1].nanos.push_back(pull_ns);
  }
  return sets;
}

}  // namespace mcdma::bench
