#include "options.hpp"

#include <toml++/toml.h>
#include <unistd.h>

#include <functional>
#include <map>

#include "mcdma/client.hpp"
#include "mcdma_internal/mailbox_layout.hpp"

namespace mcdma::daemon {
namespace {

using Setter = std::function<Status(const toml::node&, const std::string& key)>;

template <typename T>
Setter Int(T& field) {
  return [&field](const toml::node& n, const std::string& key) -> Status {
    auto v = n.value<int64_t>();
    if (!v || *v < 0) return Status(Code::kInvalid, key + ": expected a non-negative integer");
    field = static_cast<T>(*v);
    return Status::Ok();
  };
}

Setter Str(std::string& field) {
  return [&field](const toml::node& n, const std::string& key) -> Status {
    auto v = n.value<std::string>();
    if (!v) return Status(Code::kInvalid, key + ": expected a string");
    field = *v;
    return Status::Ok();
  };
}

std::map<std::string, Setter> Setters(Options& o) {
  return {
      {"socket", Str(o.socket)},
      {"host_id", Str(o.host_id)},
      {"log_level", Str(o.log_level)},
      {"drain_timeout_ms", Int(o.drain_timeout_ms)},
      {"engine.spin_budget_us", Int(o.spin_budget_us)},
      {"engine.transfer_chunk_bytes", Int(o.transfer_chunk_bytes)},
      {"mailbox.submission_entries", Int(o.submission_entries)},
      {"mailbox.completion_entries", Int(o.completion_entries)},
      {"mailbox.inbox_entries", Int(o.inbox_entries)},
      {"mailbox.arena_bytes", Int(o.arena_bytes)},
      {"mailbox.max_arena_bytes", Int(o.max_arena_bytes)},
      {"mailbox.attach_timeout_ms", Int(o.attach_timeout_ms)},
      {"limits.max_buffer_bytes", Int(o.max_buffer_bytes)},
      {"limits.max_buffers_per_session", Int(o.max_buffers_per_session)},
      {"limits.max_sessions", Int(o.max_sessions)},
      {"limits.default_timeout_ms", Int(o.default_timeout_ms)},
      {"limits.max_ring_faults", Int(o.max_ring_faults)},
      {"limits.max_backlog", Int(o.max_backlog)},
  };
}

Status Walk(const toml::table& table, const std::string& prefix,
            std::map<std::string, Setter>& setters) {
  for (const auto& [k, node] : table) {
    std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (const toml::table* sub = node.as_table()) {
      MCDMA_RETURN_IF_ERROR(Walk(*sub, key, setters));
      continue;
    }
    auto it = setters.find(key);
    if (it == setters.end()) return Status(Code::kInvalid, key + ": unknown configuration key");
    MCDMA_RETURN_IF_ERROR(it->second(node, key));
  }
  return Status::Ok();
}

Status Pow2(uint32_t v, const char* key) {
  if (!shm::IsPowerOfTwo(v) || v < 8 || v > shm::kMaxRingEntries) {
    return Status(
        Code::kInvalid,
        std::string(key) + ": must be a power of two in [8, 65536], got " + std::to_string(v));
  }
  return Status::Ok();
}

}  // namespace

Status LoadTomlFile(const std::string& path, Options& options) {
  toml::table table;
  try {
    table = toml::parse_file(path);
  } catch (const toml::parse_error& err) {
    return Status(Code::kInvalid, path + ":" + std::to_string(err.source().begin.line) + ":" +
                                      std::to_string(err.source().begin.column) + ": " +
                                      std::string(err.description()));
  }
  auto setters = Setters(options);
  Status st = Walk(table, "", setters);
  if (!st.ok()) return Status(st.code(), path + ": " + st.message());
  return Status::Ok();
}

Status Validate(Options& o) {
  if (o.socket.empty()) o.socket = DefaultSocketPath();
  if (o.socket.size() >= 100) return Status(Code::kInvalid, "socket: path longer than 99 bytes");
  if (o.host_id.empty()) {
    char name[256] = {};
    gethostname(name, sizeof(name) - 1);
    o.host_id = name;
  }
  static constexpr const char* kLevels[] = {"trace", "debug",    "info", "warn",
                                            "error", "critical", "off"};
  bool level_ok = false;
  for (const char* l : kLevels) level_ok |= (o.log_level == l);
  if (!level_ok)
    return Status(Code::kInvalid,
                  "log_level: expected one of trace, debug, info, warn, error, critical, off");
  MCDMA_RETURN_IF_ERROR(Pow2(o.submission_entries, "mailbox.submission_entries"));
  MCDMA_RETURN_IF_ERROR(Pow2(o.completion_entries, "mailbox.completion_entries"));
  MCDMA_RETURN_IF_ERROR(Pow2(o.inbox_entries, "mailbox.inbox_entries"));
  if (o.max_arena_bytes > shm::kMaxArenaBytes)
    return Status(Code::kInvalid, "mailbox.max_arena_bytes: at most 2 GiB");
  if (o.arena_bytes < uint64_t{64} * 1024 || o.arena_bytes > o.max_arena_bytes) {
    return Status(Code::kInvalid,
                  "mailbox.arena_bytes: must be in [64 KiB, mailbox.max_arena_bytes]");
  }
  if (o.max_buffer_bytes == 0)
    return Status(Code::kInvalid, "limits.max_buffer_bytes: must be > 0");
  if (o.max_sessions == 0) return Status(Code::kInvalid, "limits.max_sessions: must be > 0");
  if (o.default_timeout_ms == 0)
    return Status(Code::kInvalid, "limits.default_timeout_ms: must be > 0");
  if (o.max_backlog < 16) return Status(Code::kInvalid, "limits.max_backlog: must be >= 16");
  if (o.transfer_chunk_bytes < 4096 || o.transfer_chunk_bytes > (1ull << 30)) {
    return Status(Code::kInvalid, "engine.transfer_chunk_bytes: must be in [4096, 1 GiB]");
  }
  if (o.spin_budget_us > 1'000'000)
    return Status(Code::kInvalid, "engine.spin_budget_us: at most 1000000");
  return Status::Ok();
}

}  // namespace mcdma::daemon
