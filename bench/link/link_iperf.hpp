// The iperf3 rows of mcdma_bench_link: `iperf3 -s` on host B, then
// `iperf3 -c <B> -n <bulk bytes> -J` on host A (A -> B) and the same with
// -R (B -> A), `repeats` times each. The rate is iperf3's own figure for
// the receiving side (end.sum_received.bits_per_second).
#pragma once

#include <vector>

#include "harness/files.hpp"
#include "harness/hosts.hpp"
#include "link_orchestrator.hpp"

namespace mcdma::bench {

struct IperfRates {
  std::vector<double> a_to_b_gbps;  // GB/s, 10^9 bytes per second
  std::vector<double> b_to_a_gbps;
};

// Needs plan.iperf3_path; fails with the reason iperf3 gave.
Result<IperfRates> RunIperf(const LinkPlan& plan, const harness::Hosts& hosts,
                            const harness::TempDir& dir);

}  // namespace mcdma::bench
