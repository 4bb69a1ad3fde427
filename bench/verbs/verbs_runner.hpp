// One whole mcdma_bench_verbs run: perftest on the two devices first (the
// raw-verbs floor, with no daemon running), then the two daemons linked
// over verbs and the same measurements through them; then the tables, the
// overhead lines and the files under --out. Returns the process exit code:
// 0 when every selected measurement ran and verified, 1 otherwise.
#pragma once

#include "verbs_options.hpp"

namespace mcdma::bench {

int RunVerbsBench(VerbsPlan plan);

}  // namespace mcdma::bench
