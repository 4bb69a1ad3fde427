#include "socket_path.hpp"

#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "mcdma_internal/sys.hpp"
#include "platform/names.hpp"
#include "platform/socket.hpp"

namespace mcdma::daemon {
namespace {

// True if something accepts connections on the Unix socket at `path`.
bool SocketAnswers(const std::string& path) {
  auto fd = platform::OpenSocket(AF_UNIX, SOCK_STREAM, 0, platform::Blocking::kBlocking);
  if (!fd.ok()) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  return connect(fd->get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
}

// Gives the socket's directory to `group` (mode 0750), so that its members
// may connect; Validate checked that the group exists.
Status GiveSocketDirectoryTo(const std::string& dir, const std::string& group) {
  const struct group* gr = getgrnam(group.c_str());
  if (gr == nullptr) return Status(Code::kInvalid, "socket_group: no group '" + group + "'");
  if (chown(dir.c_str(), static_cast<uid_t>(-1), gr->gr_gid) != 0) {
    return SysError("chown", errno, "socket directory " + dir + " to group " + group);
  }
  if (chmod(dir.c_str(), 0750) != 0) return SysError("chmod", errno, "socket directory " + dir);
  return Status::Ok();
}

std::string DirectoryOf(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

}  // namespace

Result<SocketPath> SocketPath::Prepare(const std::string& path, const std::string& group) {
  MCDMA_RETURN_IF_ERROR(platform::CheckUnixSocketPath(path));
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!dir.empty() && !std::filesystem::exists(dir, ec)) {
    std::filesystem::create_directories(dir, ec);
    if (ec)
      return Status(Code::kSystem,
                    "cannot create socket directory " + dir.string() + ": " + ec.message());
    // Only the owner (a user instance) or the owner and its group (the
    // service's `mcdma` group) may reach the socket.
    chmod(dir.c_str(), geteuid() == 0 ? 0750 : 0700);
  }
  if (!group.empty()) MCDMA_RETURN_IF_ERROR(GiveSocketDirectoryTo(DirectoryOf(path), group));
  if (std::filesystem::exists(path, ec)) {
    if (SocketAnswers(path)) {
      return Status(Code::kAlreadyExists, "another mcdma-rpcd is already listening on " + path);
    }
    if (unlink(path.c_str()) != 0) return SysError("unlink", errno, "stale socket " + path);
  }
  return SocketPath(path);
}

SocketPath::~SocketPath() {
  if (!path_.empty()) unlink(path_.c_str());
}

SocketPath::SocketPath(SocketPath&& other) noexcept : path_(std::move(other.path_)) {
  other.path_.clear();
}

SocketPath& SocketPath::operator=(SocketPath&& other) noexcept {
  if (this != &other) {
    if (!path_.empty()) unlink(path_.c_str());
    path_ = std::move(other.path_);
    other.path_.clear();
  }
  return *this;
}

void SocketPath::SetModeFromDirectory() const {
  struct stat dir_st {};
  bool group = stat(DirectoryOf(path_).c_str(), &dir_st) == 0 && (dir_st.st_mode & 0070) != 0;
  chmod(path_.c_str(), group ? 0660 : 0600);
}

}  // namespace mcdma::daemon
