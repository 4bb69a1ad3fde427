// systemd's notification protocol without libsystemd.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "platform/service_manager.hpp"
#include "platform/socket.hpp"

namespace mcdma::platform {

void NotifyServiceManager(const std::string& state) {
  const char* path = std::getenv("NOTIFY_SOCKET");
  if (path == nullptr || (path[0] != '/' && path[0] != '@')) return;
  auto fd = OpenSocket(AF_UNIX, SOCK_DGRAM, 0, Blocking::kBlocking);
  if (!fd.ok()) return;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  size_t len = std::min(std::strlen(path), sizeof(addr.sun_path) - 1);
  std::memcpy(addr.sun_path, path, len);
  if (addr.sun_path[0] == '@') addr.sun_path[0] = '\0';  // abstract namespace
  auto addr_len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + len);
  (void)SendToNoSignal(fd->get(), state.data(), state.size(), reinterpret_cast<sockaddr*>(&addr),
                       addr_len);
}

std::optional<std::chrono::microseconds> WatchdogInterval() {
  const char* usec = std::getenv("WATCHDOG_USEC");
  if (usec == nullptr) return std::nullopt;
  const char* pid = std::getenv("WATCHDOG_PID");
  if (pid != nullptr && std::strtol(pid, nullptr, 10) != getpid()) return std::nullopt;
  long long v = std::strtoll(usec, nullptr, 10);
  if (v <= 0) return std::nullopt;
  return std::chrono::microseconds(v);
}

}  // namespace mcdma::platform
