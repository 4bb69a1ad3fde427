// Latency figures for the benchmarks and the tests: nearest-rank summaries
// of round-trip samples, and the raw samples as files: the binary sample
// file a client process hands its orchestrator, and one CSV per row for
// scripts.
//
// Threading: plain functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "mcdma/status.hpp"

namespace mcdma::harness {

struct Summary {
  size_t count = 0;
  double p50_us = 0;
  double p95_us = 0;
  double p99_us = 0;
  double min_us = 0;
  double mean_us = 0;
  double max_us = 0;
};
// Nearest-rank percentiles (no interpolation: every figure is a real
// sample) of round trips in nanoseconds, in microseconds.
Summary Summarize(std::vector<uint64_t> nanos);
// The nearest-rank `q` quantile (0 < q <= 1) of `values`; 0 for none.
double Percentile(std::vector<double> values, double q);
// The median of `values` (the mean of the middle two for an even count);
// 0 for none.
double Median(std::vector<double> values);

// The samples of one payload size (or one transfer size), as carried in a
// sample file.
struct SampleSet {
  size_t payload = 0;
  std::vector<uint64_t> nanos;
};
// Sample files: per set, u64 payload, u64 count, then count u64 ns (host
// byte order; the writer and the reader run on the same machine).
// bench/local/python_roles.py writes them too.
Status WriteSamples(const std::string& path, const std::vector<SampleSet>& sets);
Result<std::vector<SampleSet>> ReadSamples(const std::string& path);
// Raw samples for scripts: "sample_ns" then one integer per line.
Status WriteSampleCsv(const std::string& path, const std::vector<uint64_t>& nanos);

}  // namespace mcdma::harness
