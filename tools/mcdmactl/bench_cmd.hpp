// `mcdmactl bench PEER`: calls and one-sided READ/WRITE latency (queue depth
// 1) and bandwidth (chosen depths) from an app on this host to the
// responder on PEER, through both daemons, as perftest does for raw verbs.
// `mcdmactl bench --serve` is the responder: run it on PEER first. It
// serves `mcdma.bench.echo` (the reply is the request) and exports a buffer
// `mcdma.bench.buffer` to the hosts given with --allow (default: the peers
// linked when it starts), until SIGINT/SIGTERM or --serve-seconds.
//
// Output: perftest-style rows, a row per test and size (and depth): median,
// p95, p99 and max in microseconds, the sample count, and the transport of
// the link when the row ended; bandwidth rows add Gb/s and Mops/s. --json:
// one object {"host","peer","rows":[...]}; --raw FILE: every sample as CSV
// (test,bytes,depth,index,ns). A progress bar goes to stderr when it is a
// terminal. Exit codes as for every mcdmactl command (cli.hpp): 0 every
// row ran, 1 a row stopped at an error (named in it) or no responder,
// 2 usage.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "fabric_key_cmd.hpp"

namespace mcdma::tools {

inline constexpr const char* kBenchService = "mcdma.bench.echo";
inline constexpr const char* kBenchExport = "mcdma.bench.buffer";

// Adds `bench` to `app`; `socket` and `timeout_ms` are the global flags
// (read after parsing).
void AddBenchCommand(CLI::App& app, const std::string& socket, const int& timeout_ms,
                     LocalCommand& chosen);

}  // namespace mcdma::tools
