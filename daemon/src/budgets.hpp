// The budgets that depend on the machine, resolved once at start-up: the
// open-file budget and the connection caps that must fit in it, and the
// per-user shared-memory budget. Options left 0 ("auto") are filled in;
// explicit ones are checked, and a configuration that cannot fit fails to
// start with the numbers named. docs/operations.md explains each.
#pragma once

#include <cstdint>

#include "config/options.hpp"
#include "mcdma/status.hpp"

namespace mcdma::daemon {

// What start-up reads off the machine.
struct MachineFacts {
  uint64_t open_file_limit = 0;  // RLIMIT_NOFILE in effect (after raising)
  uint64_t shm_capacity = 0;     // platform::SharedMemoryCapacity(); 0: unknown
};

// Descriptors kept out of the connection caps: gRPC's own (epoll, wakeups,
// outbound channels), the engine's wakeups, the tcp data listener, a verbs
// device, the listeners' reserve descriptors, the log.
inline constexpr uint64_t kFilesReserved = 48;
// Per configured peer: its gRPC channel, the data connection, verbs
// objects.
inline constexpr uint64_t kFilesPerPeer = 6;
// Without /dev/shm's size: the per-user byte budget.
inline constexpr uint64_t kDefaultPerUserBytes = 16ull << 30;

// Fills max_open_files, max_connections, max_connections_per_user,
// peer_max_connections and per_user_bytes where 0, and checks that the
// connection caps fit the open-file budget. INVALID names the option.
Status ResolveBudgets(Options& options, const MachineFacts& facts);

// What the open-file budget leaves for connections after kFilesReserved
// and the configured peers (0 when nothing is left).
uint64_t FilesForConnections(const Options& options);

}  // namespace mcdma::daemon
