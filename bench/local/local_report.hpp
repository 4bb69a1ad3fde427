// mcdma_bench_local's report: the targets on the p50 ratios, and the --json
// file. The table and the rows are the harness's (harness/report.hpp).
#pragma once

#include <string>
#include <vector>

#include "harness/report.hpp"
#include "local_orchestrator.hpp"
#include "mcdma/status.hpp"

namespace mcdma::bench {

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
harness::Verdict EvaluateTarget(const std::vector<harness::Row>& rows,
                                const std::vector<size_t>& payloads, const Target& target);

// Everything a script needs to compare runs: the settings, every row (with
// min/mean/max as well), and the verdicts.
Status WriteJson(const std::string& path, const Plan& plan, const std::vector<harness::Row>& rows,
                 const std::string& reference, const std::vector<harness::Verdict>& verdicts);

}  // namespace mcdma::bench
