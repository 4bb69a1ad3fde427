// Turning per-mechanism samples into the side-by-side table, the target
// verdict and the --json file.
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "harness.hpp"

namespace bench {

// `v` with `decimals` digits after the point.
std::string Fixed(double v, int decimals);
// The median of `values` (the mean of the middle two for an even count);
// 0 for none.
double Median(std::vector<double> values);

// One table row: a mechanism at one payload size. A mechanism that failed
// has ok = false and the reason in `error`; its figures are absent.
struct Row {
  std::string mechanism;  // stable key: "daemon", "shm", "uds", "grpc"
  std::string label;      // human name shown in the table
  std::string transport;  // what carried the bytes (DESIGN: every row says)
  size_t payload = 0;
  bool ok = false;
  std::string error;
  Summary summary;
};

// p50 of `row` divided by the p50 of the `reference` mechanism at the same
// payload; empty when either is missing or failed.
std::optional<double> RatioToReference(const std::vector<Row>& rows, const Row& row,
                                       const std::string& reference);

// A target on the p50 ratio other / reference, per payload: at least
// `factor` (the reference is that much faster: daemon vs gRPC) or at most
// `factor` (other is no more than that much slower: Python vs C++).
struct Target {
  std::string reference;  // mechanism key
  std::string other;      // mechanism key
  double factor = 1;
  bool at_most = false;     // ratio <= factor, else ratio >= factor
  std::string description;  // "daemon call p50 at least 5x faster than gRPC unary p50"
};
struct Verdict {
  bool measured = false;  // every payload had both figures
  bool met = false;
  std::string description;
  std::string line;  // a final line of the report
};
Verdict EvaluateTarget(const std::vector<Row>& rows, const std::vector<size_t>& payloads,
                       const Target& target);

void PrintTable(FILE* out, const std::vector<Row>& rows, const std::string& reference);

// Everything a script needs to compare runs: the settings, every row (with
// min/mean/max as well), and the verdict.
struct RunInfo {
  int iterations = 0;
  int warmup = 0;
  std::vector<size_t> payloads;
  std::string daemon_path;
  unsigned cpus = 0;
  std::string kernel;
};
mcdma::Status WriteJson(const std::string& path, const RunInfo& info, const std::vector<Row>& rows,
                        const std::string& reference, const std::vector<Verdict>& verdicts);

// "64 B", "4 KiB", "1 MiB" (exact multiples only; otherwise bytes).
std::string FormatBytes(size_t bytes);
// `s` as a JSON string literal, quotes included.
std::string JsonQuote(const std::string& s);

}  // namespace bench
