// The measuring loop every benchmark client shares: time round trips,
// verify every reply, and write the samples for the orchestrator.
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
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "harness/child.hpp"
#include "harness/endpoint.hpp"
#include "harness/latency.hpp"
#include "mcdma/status.hpp"

namespace mcdma::harness {

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
Result<std::vector<uint64_t>> MeasureRoundTrips(size_t payload, int warmup, int iterations,
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
      return Status(reply.status().code(), "round trip " + std::to_string(i) + " of " +
                                               std::to_string(payload) +
                                               " B: " + reply.status().message());
    }
    static_assert(HasBytes<std::remove_cvref_t<decltype(reply.value())>>);
    std::span<const std::byte> got = reply.value().bytes();
    if (got.size() != request.size() || !std::equal(got.begin(), got.end(), request.begin())) {
      return Status(Code::kInternal, "reply " + std::to_string(i) + " differs from its request (" +
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

// Runs `measure(payload)` for every payload of `options` and writes the
// sample file: the body of every client role. Returns the process exit
// code (0 ok, 1 failure, reported on stderr).
template <typename Measure>
int RunClientPayloads(const RoleOptions& options, Measure&& measure) {
  std::vector<SampleSet> sets;
  for (size_t payload : options.payloads) {
    Result<std::vector<uint64_t>> samples = measure(payload);
    if (!samples.ok()) {
      fprintf(stderr, "%s %s: %s\n", options.program.c_str(), options.role.c_str(),
              samples.status().message().c_str());
      return 1;
    }
    sets.push_back(SampleSet{payload, std::move(samples).value()});
  }
  Status written = WriteSamples(options.out, sets);
  if (!written.ok()) {
    fprintf(stderr, "%s %s: %s\n", options.program.c_str(), options.role.c_str(),
            written.message().c_str());
    return 1;
  }
  return 0;
}

}  // namespace mcdma::harness
