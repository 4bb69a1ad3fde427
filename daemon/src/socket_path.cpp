#include "socket_path.hpp"

#include <grp.h>
#include <openssl/sha.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <filesystem>

#include "mcdma_internal/sys.hpp"
#include "platform/names.hpp"
#include "platform/shm.hpp"
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
  // Whether or not the socket file survived (a tmpfiles clean-up may have
  // removed it), nobody serves on this path now.
  SocketPath prepared(path);
  RemoveStaleSegments(SegmentTag(path), &prepared.removed_, &prepared.unremovable_);
  return prepared;
}

SocketPath::~SocketPath() {
  if (!path_.empty()) unlink(path_.c_str());
}

SocketPath::SocketPath(SocketPath&& other) noexcept
    : path_(std::move(other.path_)),
      removed_(std::move(other.removed_)),
      unremovable_(std::move(other.unremovable_)) {
  other.path_.clear();
}

SocketPath& SocketPath::operator=(SocketPath&& other) noexcept {
  if (this != &other) {
    if (!path_.empty()) unlink(path_.c_str());
    path_ = std::move(other.path_);
    removed_ = std::move(other.removed_);
    unremovable_ = std::move(other.unremovable_);
    other.path_.clear();
  }
  return *this;
}

Status SocketPath::SetModeFromDirectory() const {
  struct stat dir_st {};
  bool group = stat(DirectoryOf(path_).c_str(), &dir_st) == 0 && (dir_st.st_mode & 0070) != 0;
  if (chmod(path_.c_str(), group ? 0660 : 0600) != 0) return SysError("chmod", errno, path_);
  // The socket's group is the daemon's own unless it is the directory's: a
  // daemon running as root with socket_group (or in a directory of another
  // group) would otherwise leave the group's members unable to connect.
  struct stat st {};
  if (group && stat(path_.c_str(), &st) == 0 && st.st_gid != dir_st.st_gid &&
      chown(path_.c_str(), static_cast<uid_t>(-1), dir_st.st_gid) != 0) {
    return SysError("chown", errno,
                    path_ + " to the group of its directory (gid " + std::to_string(dir_st.st_gid) +
                        "); members of that group cannot connect");
  }
  return Status::Ok();
}

std::string SegmentTag(const std::string& socket_path) {
  std::error_code ec;
  std::string absolute = std::filesystem::absolute(socket_path, ec).lexically_normal().string();
  if (ec) absolute = socket_path;
  std::array<unsigned char, SHA256_DIGEST_LENGTH> digest{};
  SHA256(reinterpret_cast<const unsigned char*>(absolute.data()), absolute.size(), digest.data());
  static constexpr char kHex[] = "0123456789abcdef";
  std::string tag;
  for (int i = 0; i < 4; ++i) {  // the first 8 hex digits, as fabric-key fingerprints
    tag += kHex[digest[i] >> 4];
    tag += kHex[digest[i] & 0xf];
  }
  return tag;
}

void RemoveStaleSegments(const std::string& tag, std::vector<std::string>* removed,
                         std::vector<std::string>* failed) {
  for (const char* kind : {"mcdma-m-", "mcdma-b-"}) {
    for (const std::string& name : platform::ListSharedMemory(kind + tag)) {
      if (shm_unlink(name.c_str()) == 0) {
        removed->push_back(name);
      } else if (errno != ENOENT) {
        failed->push_back(SysError("shm_unlink", errno, name).message());
      }
    }
  }
}

}  // namespace mcdma::daemon
