// The measuring harness shared by every mechanism: the client loop that
// times round trips and verifies replies, the sample files that carry the
// timings from a client process back to the orchestrator, and statistics.
//
// Timing rule, the same for every mechanism: the clock runs from just before
// the request is handed over to just after the reply is in hand. Checking
// the reply bytes and releasing the reply happen outside the timed region.
#pragma once

#include <algorithm>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "mcdma/status.hpp"

namespace bench {

using Clock = std::chrono::steady_clock;

// What a `child` process is told on its command line (see
// local_call_bench.cpp). Descriptor numbers are those it inherited.
struct RoleOptions {
  std::string program = "mcdma_bench_local";  // prefixes the role's error messages
  std::string role;
  int fd = -1;           // the inherited socket or shared-memory fd
  int ready_fd = -1;     // servers: one byte is written here once serving
  int lifeline_fd = -1;  // servers: EOF here means "stop"
  std::string socket;    // Unix socket path (gRPC, daemon)
  std::string out;       // clients: where the samples go
  std::vector<size_t> payloads;
  int iterations = 0;
  int warmup = 0;
  int timeout_ms = 5000;      // deadline of one round trip (clients)
  int run_limit_ms = 120000;  // the longest a child lives; servers idle this long at most
};

// A role's failure: "PROGRAM ROLE: CODE: message" on stderr; returns its
// exit code, 1.
inline int Fail(const RoleOptions& options, const mcdma::Status& status) {
  fprintf(stderr, "%s %s: %s\n", options.program.c_str(), options.role.c_str(),
          status.ToString().c_str());
  return 1;
}

// A reply view for mechanisms whose reply lives in a buffer they own.
struct ByteView {
  std::span<const std::byte> view;
  std::span<const std::byte> bytes() const { return view; }
};

template <typename R>
concept HasBytes = requires(const R& r) {
  { r.bytes() } -> std::convertible_to<std::span<const std::byte>>;
};

// Fills a request with a recognisable pattern; StampIteration then puts the
// iteration number into the first bytes so a stale or crossed reply fails
// the comparison instead of passing silently.
void FillPattern(std::span<std::byte> request);
void StampIteration(std::span<std::byte> request, uint64_t iteration);

// Runs `warmup` untimed then `iterations` timed round trips of `payload`
// bytes through `round_trip`, a callable taking the request span and
// returning Result<R> with R providing bytes(). Returns nanoseconds per
// round trip, or the first error (including a reply that differs).
template <typename RoundTrip>
mcdma::Result<std::vector<uint64_t>> MeasureRoundTrips(size_t payload, int warmup, int iterations,
                                                       RoundTrip&& round_trip) {
  std::vector<std::byte> request(payload);
  FillPattern(request);
  std::vector<uint64_t> samples;
  samples.reserve(static_cast<size_t>(iterations));
  const int total = warmup + iterations;
  for (int i = 0; i < total; ++i) {
    StampIteration(request, static_cast<uint64_t>(i));
    auto t0 = Clock::now();
    auto reply = round_trip(std::span<const std::byte>(request));
    auto t1 = Clock::now();
    if (!reply.ok()) {
      return mcdma::Status(reply.status().code(), "round trip " + std::to_string(i) + " of " +
                                                      std::to_string(payload) +
                                                      " B: " + reply.status().message());
    }
    static_assert(HasBytes<std::remove_cvref_t<decltype(reply.value())>>);
    std::span<const std::byte> got = reply.value().bytes();
    if (got.size() != request.size() || !std::equal(got.begin(), got.end(), request.begin())) {
      return mcdma::Status(mcdma::Code::kInternal, "reply " + std::to_string(i) +
                                                       " differs from its request (" +
                                                       std::to_string(got.size()) + " B back for " +
                                                       std::to_string(payload) + " B)");
    }
    if (i >= warmup) {
      samples.push_back(static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()));
    }
  }
  return samples;
}

// The samples of one payload size, as carried in a sample file.
struct SampleSet {
  size_t payload = 0;
  std::vector<uint64_t> nanos;
};

// Sample files: per payload, u64 payload, u64 count, then count u64 ns
// (host byte order; writer and reader are the same binary).
mcdma::Status WriteSamples(const std::string& path, const std::vector<SampleSet>& sets);
mcdma::Result<std::vector<SampleSet>> ReadSamples(const std::string& path);

// Runs `measure(payload)` for every payload of `options` and writes the
// sample file: the body of every client role. Returns the process exit
// code (0 ok, 1 failure, reported on stderr).
template <typename Measure>
int RunClientPayloads(const RoleOptions& options, Measure&& measure) {
  std::vector<SampleSet> sets;
  for (size_t payload : options.payloads) {
    mcdma::Result<std::vector<uint64_t>> samples = measure(payload);
    if (!samples.ok()) {
      fprintf(stderr, "%s %s: %s\n", options.program.c_str(), options.role.c_str(),
              samples.status().message().c_str());
      return 1;
    }
    sets.push_back(SampleSet{payload, std::move(samples).value()});
  }
  mcdma::Status written = WriteSamples(options.out, sets);
  if (!written.ok()) {
    fprintf(stderr, "%s %s: %s\n", options.program.c_str(), options.role.c_str(),
            written.message().c_str());
    return 1;
  }
  return 0;
}

// Server side of the start-up handshake: one byte on the ready pipe.
void SignalReady(int ready_fd);
// The same for a server listening on a kernel-chosen port: "P<port>" on the
// ready pipe (read by WaitReadyMessage, process.hpp).
void SignalReadyPort(int ready_fd, uint16_t port);
// Blocks until the orchestrator closes the lifeline (EOF) or `limit` passes.
void WaitForLifeline(int lifeline_fd, std::chrono::milliseconds limit);

struct Summary {
  size_t count = 0;
  double p50_us = 0;
  double p95_us = 0;
  double p99_us = 0;
  double min_us = 0;
  double mean_us = 0;
  double max_us = 0;
};
// Nearest-rank percentiles (no interpolation: every figure is a real sample).
Summary Summarize(std::vector<uint64_t> nanos);

// A FILE* closed when it goes out of scope (fclose(f.release()) to see
// the close's error).
struct FileCloser {
  void operator()(FILE* f) const { fclose(f); }
};
using File = std::unique_ptr<FILE, FileCloser>;
// kSystem "WHAT PATH: strerror(errno)".
mcdma::Status FileError(const char* what, const std::string& path);

// "Linux 6.1.0-..." from uname(2).
std::string KernelName();
// A benchmark's main(): `body`'s exit code, or 1 with a message on an
// exception (std::bad_alloc, a filesystem error), never std::terminate, so
// destructors run (mcdma_bench_link's HostPair removes its namespaces).
int GuardedMain(const char* program, int (*body)(int, char**), int argc, char** argv);

}  // namespace bench
