// mcdma-rpcd's configuration: one Options struct, loaded from a TOML file
// (--config) and overridden by command-line flags. Every field says its
// default; Validate() names the offending field on error.
#pragma once

#include <cstdint>
#include <string>

#include "mcdma/status.hpp"

namespace mcdma::daemon {

struct Options {
  // Control socket; default: mcdma::DefaultSocketPath() ($MCDMA_SOCKET,
  // $XDG_RUNTIME_DIR/mcdma/rpcd.sock for a user, /run/mcdma/rpcd.sock as root).
  std::string socket;
  // This host's id as peers and status see it; default: the hostname.
  std::string host_id;
  // trace, debug, info, warn, error, critical, off. Default "info".
  std::string log_level = "info";
  // Engine: how long the engine spins (yielding) before it sleeps. 50 us.
  uint32_t spin_budget_us = 50;
  // Mailbox defaults for sessions that ask for 0; also the maxima.
  uint32_t submission_entries = 1024;
  uint32_t completion_entries = 1024;
  uint32_t inbox_entries = 1024;
  uint64_t arena_bytes = 32ull << 20;  // both halves; 32 MiB
  uint64_t max_arena_bytes = 256ull << 20;
  // Limits.
  uint64_t max_buffer_bytes = 16ull << 30;  // one buffer; 16 GiB
  uint32_t max_buffers_per_session = 1024;
  uint32_t max_sessions = 256;
  uint32_t default_timeout_ms = 30000;         // for submissions with timeout 0
  uint32_t max_ring_faults = 64;               // then the session is closed
  uint32_t max_backlog = 8192;                 // undelivered events per session
  uint64_t transfer_chunk_bytes = 1ull << 20;  // one posted transfer piece; 1 MiB
  uint32_t drain_timeout_ms = 5000;            // SIGTERM: wait this long for in-flight work
  uint32_t attach_timeout_ms = 10000;          // unlink segments not mapped by then
};

// Loads a TOML file over `options` (keys documented in
// systemd/rpcd.toml.example). Unknown keys are errors, so typos are caught.
Status LoadTomlFile(const std::string& path, Options& options);
// Checks ranges and relations; fills host_id and socket defaults.
Status Validate(Options& options);

}  // namespace mcdma::daemon
