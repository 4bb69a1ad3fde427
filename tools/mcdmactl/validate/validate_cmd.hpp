// `mcdmactl validate PEER`: the run a person with two real hosts makes to
// know the link works and how fast, and sends back. Run `mcdmactl validate
// --serve` on PEER first (validate_wire.hpp says what the two say to each
// other). It checks this host's setup (doctor) and the link, moves
// byte-verified calls both ways and WRITE/READ both ways, measures QD1
// latency of calls, WRITE and READ at each --sizes (--warmup, then
// --samples kept raw), the same with perftest on the same devices side by
// side (ib_send_lat, ib_write_lat, ib_read_lat; ib_write_bw, ib_read_bw)
// for each RDMA rail of the link, and bandwidth through the daemons. It
// prints the report and, with --out DIR, writes report.txt, report.json
// and samples.csv there.
//
// Exit codes as for every mcdmactl command (cli.hpp): 0 every check passed
// and every row ran, 1 otherwise (the report says which), 2 usage.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "fabric_key_cmd.hpp"

namespace mcdma::tools {

void AddValidateCommand(CLI::App& app, const std::string& socket, const int& timeout_ms,
                        LocalCommand& chosen);

}  // namespace mcdma::tools
