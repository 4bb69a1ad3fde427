// The relay mode's figures (link_relay.hpp) and how they are shown: the
// bulk table (direct, 1 relay, 2 relays, raw TCP; ratios to the direct
// link and the direct link over raw TCP), the call table (p50, p99, the
// p50 added by each hop, over raw TCP), what the cables and the relays
// carried, the target line, and the same as JSON.
//
// Threading: plain functions; the orchestrator's thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/report.hpp"
#include "link_relay.hpp"
#include "relay_fabric.hpp"  // RelayCounters

namespace mcdma::bench {

// One bulk row: the app on host a against an export on `host` (or the raw
// TCP stream over the a-b cable).
struct RelayBulk {
  std::string key;    // "direct", "relay1", "relay2", "tcp"
  std::string label;  // "host-b, direct"
  int relays = 0;
  bool ran = false;
  bool ok = false;
  std::string error;
  std::vector<double> write_mbps;  // a -> host, one per timed transfer
  std::vector<double> read_mbps;   // host -> a
  // Bytes each cable direction sent over the whole pair (a>b, b>a, b>c,
  // c>b, c>d, d>c: the untimed round, the timed ones, set-up); empty when
  // the counters could not be read.
  std::vector<uint64_t> cable_tx;
};

struct RelayResults {
  std::string setup;  // hosts, cables, rate
  std::string daemon_path;
  std::string routes;               // host a's routes once they were all there
  double routes_after_s = -1;       // -1: not all there in time
  std::vector<RelayBulk> bulk;      // direct, relay1, relay2 (those run)
  RelayBulk tcp;                    // raw TCP over the a-b cable
  std::vector<harness::Row> calls;  // "daemon-b", "daemon-c", "daemon-d", "tcp", "tcpspin"
  // Host b's and c's relay counters over the calls and over the bulk.
  RelayCounters calls_relayed[2];
  RelayCounters bulk_relayed[2];
  std::vector<std::string> failures;  // one line each
};

// Prints the whole report to stdout; fills `verdicts`.
void PrintRelayReport(const RelayOptions& o, const RelayResults& r,
                      std::vector<harness::Verdict>& verdicts);
Status WriteRelayJson(const std::string& path, const RelayOptions& o, const RelayResults& r,
                      const std::vector<harness::Verdict>& verdicts);

}  // namespace mcdma::bench
