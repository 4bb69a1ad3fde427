// The control socket's path: made ready before the gRPC server binds it,
// and removed when the daemon stops. Owned by the Daemon (main thread).
//
// The socket is also the daemon's identity across restarts (systemd starts
// the next instance on the same socket), so the shm segments a daemon
// creates carry a tag derived from it (SegmentTag): when an instance is
// killed, the names it had not unlinked yet (segments its apps had not
// mapped) are found and removed by the next instance on that socket, and
// by no other daemon.
#pragma once

#include <string>
#include <vector>

#include "mcdma/status.hpp"

namespace mcdma::daemon {

class SocketPath {
 public:
  // Makes `path` ready to bind: creates its directory (0700, or 0750 as
  // root), gives the directory to `group` if set, and removes a stale
  // socket file and the segments an earlier instance on this socket left
  // (RemoveStaleSegments). Fails ALREADY_EXISTS, touching nothing, if
  // another daemon answers on it.
  static Result<SocketPath> Prepare(const std::string& path, const std::string& group);
  // Removes the socket file (if this object still owns the path).
  ~SocketPath();
  SocketPath(SocketPath&& other) noexcept;
  SocketPath& operator=(SocketPath&& other) noexcept;
  SocketPath(const SocketPath&) = delete;
  SocketPath& operator=(const SocketPath&) = delete;

  // Once the server listens: the socket gets mode 0660 and its directory's
  // group when the directory has group permission bits (the service's
  // /run/mcdma, group mcdma), else 0600 (a user instance's private
  // directory). An error says which call failed; the socket stays usable
  // by its owner.
  Status SetModeFromDirectory() const;

  const std::string& path() const { return path_; }
  // The names RemoveStaleSegments removed (and those it could not, with
  // why) when this path was prepared, for the start-up log.
  const std::vector<std::string>& removed_segments() const { return removed_; }
  const std::vector<std::string>& unremovable_segments() const { return unremovable_; }

 private:
  explicit SocketPath(std::string path) : path_(std::move(path)) {}
  std::string path_;  // "" once moved from
  std::vector<std::string> removed_;
  std::vector<std::string> unremovable_;
};

// 8 lowercase hex characters of the SHA-256 of the socket's absolute path: the
// first characters of every segment name the daemon on that socket makes
// (ShmSegment::NewName(kind, tag)). Not a secret: the rest of each name is
// random.
std::string SegmentTag(const std::string& socket_path);

// Unlinks every "/mcdma-m-TAG..." and "/mcdma-b-TAG..." shm object: called
// only once no daemon answers on the socket, so they are an earlier
// instance's. Names removed go to `removed`; names that could not be
// removed go to `failed`, each with why. Linux only: macOS cannot list shm
// objects (platform/shm.hpp), so there nothing is found.
void RemoveStaleSegments(const std::string& tag, std::vector<std::string>* removed,
                         std::vector<std::string>* failed);

}  // namespace mcdma::daemon
