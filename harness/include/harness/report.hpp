// What every benchmark's report is made of: numbers and sizes as text, JSON
// and CSV strings, the call table (one row per mechanism and payload, with
// its latency summary and its ratio to a reference mechanism), the rows as
// JSON, and the targets' verdicts.
//
// Threading: plain functions; thread-safe.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "harness/latency.hpp"

namespace mcdma::harness {

// `v` with `decimals` digits after the point.
std::string Fixed(double v, int decimals);
// "64 B", "4 KiB", "1 MiB", "1 GiB" (exact multiples only; otherwise bytes).
std::string FormatBytes(uint64_t bytes);
// `s` as a JSON string literal, quotes included.
std::string JsonQuote(const std::string& s);
// `s` as a CSV field: quoted, inner quotes doubled, newlines flattened.
std::string CsvField(const std::string& s);
// "[1, 2, 3]".
std::string JsonList(const std::vector<size_t>& values);
// What every benchmark's --json says about its run, as JSON object members
// one per line, each ending in a comma: iterations, warmup, payloads, the
// daemon binary, this machine's CPUs and kernel.
std::string RunJson(int iterations, int warmup, const std::vector<size_t>& payloads,
                    const std::string& daemon_path);

// One call-table row: a mechanism at one payload size. A mechanism that
// failed (or was skipped) has ok = false and the reason in `error`; its
// figures are absent.
struct Row {
  std::string mechanism;  // stable key: "daemon", "shm", "tcp", ...
  std::string label;      // human name shown in the table
  std::string transport;  // what carried the bytes (every row says)
  size_t payload = 0;
  bool ok = false;
  std::string error;
  Summary summary;
};

// p50 of `row` divided by the p50 of the `reference` mechanism at the same
// payload; empty when either is missing or failed.
std::optional<double> RatioToReference(const std::vector<Row>& rows, const Row& row,
                                       const std::string& reference);
// The row of `mechanism` at `payload`; nullptr when there is none.
const Row* FindRow(const std::vector<Row>& rows, const std::string& mechanism, size_t payload);

// The table: label (`label_width` wide), transport, payload, p50, p99 and
// "p50 / <reference>". A failed row says FAILED (SKIPPED when its mechanism
// is in `skipped`) and why.
void PrintCallTable(FILE* out, const std::vector<Row>& rows, const std::string& reference,
                    int label_width, const std::vector<std::string>& skipped = {});
// The rows as JSON objects, one per line ("    {...},\n"): key, label,
// transport, payload, ok, and count, p50/p99/min/mean/max in us (with
// p50_ratio_to_<reference> unless `reference` is empty) or the error.
std::string CallRowsJson(const std::vector<Row>& rows, const std::string& reference);

// One target of a run and whether it was met.
struct Verdict {
  std::string key;  // stable name for scripts ("call_vs_tcp"); may be empty
  std::string description;
  bool measured = false;  // every figure it needs was there
  bool met = false;
  std::string line;  // "target: <description>: MET (<detail>)"
};
// A verdict with its line; `met` only counts when `measured`.
Verdict MakeVerdict(std::string key, std::string description, bool measured, bool met,
                    const std::string& detail);
// The verdicts as JSON objects, one per line (key only when set).
std::string VerdictsJson(const std::vector<Verdict>& verdicts);

}  // namespace mcdma::harness
