// Reading perftest (linux-rdma/perftest: ib_write_lat, ib_send_lat,
// ib_write_bw, ib_read_bw): its sample lists and result tables, the clock
// warnings that make its figures meaningless, which GID of a device it
// must use for RoCE v2 over IPv4, and whether its server listens yet.
// Shared by `mcdma_bench_verbs` (bench/verbs) and `mcdmactl validate`.
//
// No state; any thread. The sysfs and /proc readers are Linux's; elsewhere
// they find nothing (kNotFound, false).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mcdma/status.hpp"

namespace mcdma::perftest {

// The index of `device` port `port`'s RoCE v2 GID that is IPv4-mapped
// (::ffff:a.b.c.d), read from /sys/class/infiniband/<device>/ports/<port>/
// gids/N and gid_attrs/types/N. kNotFound lists what the port has.
Result<int> RoceV2Ipv4GidIndex(const std::string& device, int port = 1);
// The IPv4 address in that GID ("10.0.1.2"); kNotFound as above.
Result<std::string> RoceV2Ipv4Address(const std::string& device, int gid_index, int port = 1);

// True once some socket listens on TCP `port` (/proc/net/tcp and tcp6:
// local address "HEX_IP:HEX_PORT", state 0A = LISTEN). perftest's server
// prints nothing reliable before it listens (its stdout is a file, so
// buffered), and its client gives up at once on a refused connection.
bool Listening(uint16_t port);

// perftest converts TSC cycles to time with a CPU rate it samples against
// gettimeofday at start-up. Under emulation that sampling can fail outright
// (r^2 of the fit below 0.9: perftest then reports 0 or infinity), or
// differ from /proc/cpuinfo by more than 2%, when perftest uses the sampled
// rate and warns. The line saying either, from its stdout `text` or stderr
// `errors`; "" when neither.
std::string ClockSamplingFailure(const std::string& text, const std::string& errors);
std::string CpuRateConflict(const std::string& text, const std::string& errors);

// The samples `ib_*_lat -U` prints ("#, usec" then "N, value" lines), in
// ns, each multiplied by `rtt_factor`: perftest reports a ping-pong test's
// (WRITE, SEND) samples as half the round trip, so 2 gives the round trip.
Result<std::vector<uint64_t>> ParseUnsortedLatency(const std::string& text, int rtt_factor);

// "BW average[Gb/sec]" of the result row for `msg_bytes` in ib_*_bw
// --report_gbits output, as GB/s (10^9 B/s). perftest's Gb is 10^9 bits.
Result<double> ParseAverageBandwidth(const std::string& text, uint64_t msg_bytes);

// The first line of `text` containing `what`, trimmed; "" when none.
std::string LineWith(const std::string& text, const std::string& what);

}  // namespace mcdma::perftest
