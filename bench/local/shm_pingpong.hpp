// The raw shared-memory baseline of mcdma_bench_local: a ping-pong in a
// memfd, one slot per direction; wait = spin with sched_yield for ~50 us,
// then sleep on a futex (shm_pingpong.cpp says why in that order). Each
// role returns a process exit code: 0 ok, 1 failure (the reason on
// stderr).
#pragma once

#include <cstddef>

#include "harness/endpoint.hpp"
#include "mcdma/status.hpp"
#include "platform/fd.hpp"

namespace mcdma::bench {

// Orchestrator side: a zeroed memfd segment (close-on-exec; hand it to
// both children) with room for `max_payload` each way.
Result<platform::Fd> CreateShmSegment(size_t max_payload);
int RunShmServer(const harness::RoleOptions& options);
int RunShmClient(const harness::RoleOptions& options);

}  // namespace mcdma::bench
