// The hostile apps of mcdma_bench_attacks (attacks_bench.cpp), each run as
// its own process: `mcdma_bench_attacks attacker ROLE SOCKET PEER_IP
// PEER_PORT READY_FD`, as another user than the well-behaved apps when the
// benchmark runs as root (setpriv), and the keyless peer from another
// network namespace when it is given one. A role takes what it can, writes one line saying what it
// got (the named errors it was refused with) to READY_FD, closes it, and then holds everything
// until it is killed.
#pragma once

#include <string>
#include <vector>

namespace mcdma::bench::attacks {

struct AttackInfo {
  const char* key;          // the role name on the command line
  const char* description;  // one line for the table's legend
};

// The six attacks, in the order they run.
const std::vector<AttackInfo>& Attacks();

// Runs role `role`; returns the exit code (never returns on success: it
// holds what it took until killed).
int RunAttacker(const std::string& role, const std::string& socket, const std::string& peer_ip,
                int peer_port, int ready_fd);

// A service name the attackers use for their own traffic.
inline constexpr char kSinkService[] = "attack.sink";

}  // namespace mcdma::bench::attacks
