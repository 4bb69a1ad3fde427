// The control socket's path: made ready before the gRPC server binds it,
// and removed when the daemon stops. Owned by the Daemon (main thread).
#pragma once

#include <string>

#include "mcdma/status.hpp"

namespace mcdma::daemon {

class SocketPath {
 public:
  // Makes `path` ready to bind: creates its directory (0700, or 0750 as
  // root), gives the directory to `group` if set, and removes a stale
  // socket file. Fails ALREADY_EXISTS, touching nothing, if another daemon
  // answers on it.
  static Result<SocketPath> Prepare(const std::string& path, const std::string& group);
  // Removes the socket file (if this object still owns the path).
  ~SocketPath();
  SocketPath(SocketPath&& other) noexcept;
  SocketPath& operator=(SocketPath&& other) noexcept;
  SocketPath(const SocketPath&) = delete;
  SocketPath& operator=(const SocketPath&) = delete;

  // Once the server listens: the socket gets mode 0660 when its directory
  // has group permission bits (the service's /run/mcdma, group mcdma), else
  // 0600 (a user instance's private directory).
  void SetModeFromDirectory() const;

  const std::string& path() const { return path_; }

 private:
  explicit SocketPath(std::string path) : path_(std::move(path)) {}
  std::string path_;  // "" once moved from
};

}  // namespace mcdma::daemon
