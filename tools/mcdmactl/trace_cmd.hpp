// `mcdmactl trace PEER`: where the microseconds of a call to PEER go. It
// opens an app session with call tracing on (ClientOptions::trace_calls),
// makes --warmup then --count calls of --bytes to PEER's service (default
// mcdma.bench.echo: run `mcdmactl bench --serve` on PEER first), reads the
// daemon's records of its own calls (Admin.Trace) and prints the stage
// breakdown (trace_report.hpp): p50/p90/p99/mean per stage and each
// stage's share of the total. --json: one object; --raw FILE: every
// stage's samples as CSV.
//
// Exit codes as for every mcdmactl command (cli.hpp): 0 the calls ran and
// were traced, 1 a call failed or the daemon kept no record of them (a
// daemon that predates tracing), 2 usage.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "fabric_key_cmd.hpp"

namespace mcdma::tools {

void AddTraceCommand(CLI::App& app, const std::string& socket, const int& timeout_ms,
                     LocalCommand& chosen);

}  // namespace mcdma::tools
