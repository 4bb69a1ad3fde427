// mcdma_bench_verbs's report: the latency table (daemon call vs
// ib_write_lat round trip, per payload, median/p95/p99/max and their
// ratios), the bandwidth table (daemon WriteBatch/ReadBatch vs
// ib_write_bw/ib_read_bw, MB/s), the overhead lines, and the files a script
// reads: one CSV of raw samples per latency row and summary.csv.
//
// Every figure is labelled emulated: Soft-RoCE under TCG says whether the
// path works and how the daemon compares with raw verbs on the same
// emulated device, never what hardware would do.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "harness/latency.hpp"
#include "mcdma/status.hpp"

namespace mcdma::bench {

inline constexpr char kEmulatedLabel[] =
    "emulated (Soft-RoCE under TCG): for pass/fail and ratios only";

// One latency row: a mechanism at one payload. ok = false: `error` says why
// and there are no figures.
struct LatencyRow {
  std::string key;    // "daemon", "perftest" or "linktest" (diagnostic)
  std::string label;  // shown in the table
  size_t payload = 0;
  bool ok = false;
  std::string error;
  std::vector<uint64_t> nanos;  // round trips, in the order measured
  harness::Summary stats;       // Summarize(nanos)
  std::string csv;              // the raw samples' file name in the output dir
};

// One bandwidth row: a mechanism in one direction, one MB/s (10^6 B/s)
// figure per timed transfer.
struct BandwidthRow {
  std::string key;        // "daemon" or "perftest"
  std::string label;      // "mcdma-rpcd WriteBatch", "ib_write_bw", ...
  std::string direction;  // "WRITE" (A's bytes into B) or "READ" (B's into A)
  uint64_t bytes = 0;     // per transfer
  uint64_t unit = 0;      // WR size: perftest -s, or the daemon's piece size
  bool ok = false;
  std::string error;
  std::vector<double> mbps;
};

// Every row's figures as one CSV: kind,mechanism,label,payload_or_direction,
// count,p50_us,p95_us,p99_us,max_us,mbps_median,mbps_min,mbps_max,ok,error.
mcdma::Status WriteSummaryCsv(const std::string& path, const std::vector<LatencyRow>& latency,
                              const std::vector<BandwidthRow>& bandwidth);

void PrintLatencyTable(FILE* out, const std::vector<LatencyRow>& rows,
                       const std::vector<size_t>& payloads);
void PrintBandwidthTable(FILE* out, const std::vector<BandwidthRow>& rows);
// "daemon overhead vs perftest: ..." lines: latency p50 ratios per payload
// and bandwidth median ratios per direction, or why one is missing.
void PrintOverhead(FILE* out, const std::vector<LatencyRow>& latency,
                   const std::vector<size_t>& payloads, const std::vector<BandwidthRow>& bandwidth);

}  // namespace mcdma::bench
