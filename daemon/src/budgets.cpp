#include "budgets.hpp"

#include <algorithm>
#include <string>

namespace mcdma::daemon {

uint64_t FilesForConnections(const Options& o) {
  uint64_t reserved = kFilesReserved + kFilesPerPeer * o.peers.size();
  return o.max_open_files > reserved ? o.max_open_files - reserved : 0;
}

Status ResolveBudgets(Options& o, const MachineFacts& facts) {
  if (o.max_open_files == 0) o.max_open_files = facts.open_file_limit;
  if (facts.open_file_limit != 0 && o.max_open_files > facts.open_file_limit) {
    return Status(Code::kInvalid, "limits.max_open_files: " + std::to_string(o.max_open_files) +
                                      " is above the process's limit on open files (" +
                                      std::to_string(facts.open_file_limit) +
                                      "); raise LimitNOFILE / ulimit -n, or lower it");
  }
  uint64_t room = FilesForConnections(o);
  if (room < 16) {
    return Status(Code::kInvalid,
                  "limits.max_open_files: " + std::to_string(o.max_open_files) + " leaves " +
                      std::to_string(room) + " descriptors for connections (at least " +
                      std::to_string(16 + kFilesReserved + kFilesPerPeer * o.peers.size()) +
                      " needed with " + std::to_string(o.peers.size()) + " peers)");
  }
  if (o.max_connections == 0)
    o.max_connections = static_cast<uint32_t>(std::min<uint64_t>(room / 2, 1u << 20));
  if (o.peer_max_connections == 0) {
    o.peer_max_connections =
        static_cast<uint32_t>(std::max<uint64_t>(4, std::min<uint64_t>(room / 4, 1u << 20)));
  }
  if (uint64_t{o.max_connections} + o.peer_max_connections > room) {
    return Status(Code::kInvalid,
                  "limits.max_connections (" + std::to_string(o.max_connections) +
                      ") + peer_limits.max_connections (" + std::to_string(o.peer_max_connections) +
                      ") exceed the " + std::to_string(room) +
                      " descriptors limits.max_open_files (" + std::to_string(o.max_open_files) +
                      ") leaves for connections");
  }
  if (o.max_connections_per_user == 0) {
    o.max_connections_per_user = std::max<uint32_t>(4, o.max_connections / 4);
  }
  o.max_connections_per_user = std::min(o.max_connections_per_user, o.max_connections);
  if (o.per_user_bytes == 0) {
    o.per_user_bytes = facts.shm_capacity != 0 ? facts.shm_capacity / 4 * 3 : kDefaultPerUserBytes;
  }
  return Status::Ok();
}

}  // namespace mcdma::daemon
