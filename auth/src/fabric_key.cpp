#include "mcdma_auth/fabric_key.hpp"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <utility>

#include "mcdma_internal/sys.hpp"
#include "platform/fd.hpp"

namespace mcdma {
namespace {

constexpr size_t kHexChars = 2 * FabricKey::kBytes;
constexpr char kHexDigits[] = "0123456789abcdef";
// What every "make a new one" hint says.
constexpr const char* kNewKeyHint = "mcdmactl fabric-key new ";

// A buffer that holds key material: zeroed however the scope is left.
template <size_t N>
struct SecretBuffer {
  std::array<char, N> bytes{};
  SecretBuffer() = default;
  SecretBuffer(const SecretBuffer&) = delete;
  SecretBuffer& operator=(const SecretBuffer&) = delete;
  ~SecretBuffer() { OPENSSL_cleanse(bytes.data(), bytes.size()); }
};

using platform::Fd;

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string Octal(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

std::string Prefix(const std::string& path) { return "fabric key " + path; }

// Maps an errno from open/lstat on the key path to a Status that says what
// to do; `call` names the failing system call for anything unexpected.
Status PathError(const char* call, int err, const std::string& path) {
  switch (err) {
    case ENOENT:
      return Status(Code::kNotFound, Prefix(path) + " does not exist; create one with '" +
                                         kNewKeyHint + path +
                                         "' and copy that file to every host of the fabric");
    case EACCES:
      return Status(Code::kPermissionDenied, Reason::kAccessDenied,
                    "cannot read " + Prefix(path) +
                        ": permission denied; it must be readable by the user the daemon "
                        "runs as (euid " +
                        std::to_string(geteuid()) + ")");
    case ELOOP:
      return Status(Code::kInvalid, Reason::kKeyFileLink,
                    Prefix(path) +
                        " is a symbolic link; point the configuration at "
                        "the key file itself");
    default:
      return SysError(call, err, path);
  }
}

// Maps an errno from creating the key (or its temporary file) at `path`.
Status CreateError(int err, const std::string& path) {
  switch (err) {
    case ENOENT:
      return Status(Code::kNotFound, "cannot create " + Prefix(path) + ": directory " +
                                         std::filesystem::path(path).parent_path().string() +
                                         " does not exist");
    case EACCES:
      return Status(Code::kPermissionDenied, Reason::kAccessDenied,
                    "cannot create " + Prefix(path) + ": permission denied (euid " +
                        std::to_string(geteuid()) + ")");
    default:
      return SysError("open", err, path);
  }
}

// Type, owner and mode checks, in the order an operator would fix them.
Status CheckFileStat(const struct stat& st, const std::string& path) {
  if (S_ISLNK(st.st_mode)) return PathError("lstat", ELOOP, path);
  if (S_ISDIR(st.st_mode)) {
    return Status(Code::kInvalid, Prefix(path) + " is a directory; expected the key file (" +
                                      kNewKeyHint + "PATH writes one)");
  }
  if (!S_ISREG(st.st_mode)) {
    return Status(Code::kInvalid, Prefix(path) + " is not a regular file");
  }
  if (st.st_uid != geteuid()) {
    return Status(Code::kPermissionDenied, Reason::kKeyFileOwner,
                  Prefix(path) + " is owned by uid " + std::to_string(st.st_uid) +
                      ", not by this process's uid " + std::to_string(geteuid()) +
                      "; it must belong to the user the daemon runs as (chown " +
                      std::to_string(geteuid()) + " " + path + ")");
  }
  if ((st.st_mode & 077) != 0) {
    return Status(Code::kPermissionDenied, Reason::kKeyFileMode,
                  Prefix(path) + " has mode " + Octal(st.st_mode) +
                      "; it must be 0600 (chmod 600 " + path + ")");
  }
  return Status::Ok();
}

Status SizeError(const std::string& path, long long size) {
  std::string msg = Prefix(path) + " holds " + std::to_string(size) +
                    " bytes; expected 64 hex digits (32 bytes) and an optional newline";
  if (size == static_cast<long long>(FabricKey::kBytes)) {
    msg += " (raw binary keys are not accepted: convert with 'xxd -p -c 64')";
  }
  return Status(Code::kInvalid, msg + "; write a new one with '" + kNewKeyHint + path + "'");
}

// Decodes "64 hex digits [\n]" into a key. Never quotes the content.
Result<FabricKey> ParseKeyText(const char* text, size_t len, const std::string& path) {
  if (len != kHexChars && len != kHexChars + 1) {
    return SizeError(path, static_cast<long long>(len));
  }
  if (len == kHexChars + 1 && text[kHexChars] != '\n') {
    return Status(Code::kInvalid, Prefix(path) +
                                      " has a character other than a newline after its 64 "
                                      "hex digits");
  }
  std::array<uint8_t, FabricKey::kBytes> raw{};
  for (size_t i = 0; i < FabricKey::kBytes; ++i) {
    const int hi = HexValue(text[2 * i]);
    const int lo = HexValue(text[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      OPENSSL_cleanse(raw.data(), raw.size());
      return Status(Code::kInvalid, Prefix(path) + " is not 64 hex digits (character " +
                                        std::to_string(2 * i + (hi < 0 ? 0 : 1) + 1) +
                                        " is not 0-9a-fA-F)");
    }
    raw[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  FabricKey key = FabricKey::FromBytes(raw);
  OPENSSL_cleanse(raw.data(), raw.size());
  return key;
}

Status WriteAll(int fd, const char* data, size_t len, const std::string& path) {
  while (len > 0) {
    const ssize_t n = ::write(fd, data, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return SysError("write", errno, path);
    }
    data += n;
    len -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

// Writes the hex form of a fresh key to the open, empty `fd`, then makes it
// 0600 and durable.
Status FillKeyFile(int fd, const std::string& path) {
  std::array<uint8_t, FabricKey::kBytes> raw{};
  if (RAND_bytes(raw.data(), static_cast<int>(raw.size())) != 1) {
    return Status(Code::kInternal, "RAND_bytes failed: the OS random source is unavailable");
  }
  SecretBuffer<kHexChars + 1> text;
  for (size_t i = 0; i < raw.size(); ++i) {
    text.bytes[2 * i] = kHexDigits[raw[i] >> 4];
    text.bytes[2 * i + 1] = kHexDigits[raw[i] & 15];
  }
  OPENSSL_cleanse(raw.data(), raw.size());
  text.bytes[kHexChars] = '\n';
  // Exactly 0600 whatever the umask left (and never anything wider).
  if (::fchmod(fd, 0600) != 0) return SysError("fchmod", errno, path);
  MCDMA_RETURN_IF_ERROR(WriteAll(fd, text.bytes.data(), text.bytes.size(), path));
  if (::fsync(fd) != 0) return SysError("fsync", errno, path);
  return Status::Ok();
}

std::string ParentDir(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

// Makes the new directory entry durable too.
Status SyncDir(const std::string& dir) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return SysError("open", errno, dir);
  if (::fsync(fd.get()) != 0) return SysError("fsync", errno, dir);
  return Status::Ok();
}

Status CreateExclusive(const std::string& path) {
  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (fd.get() < 0) {
    if (errno == EEXIST) {
      return Status(Code::kAlreadyExists,
                    Prefix(path) +
                        " already exists; refusing to overwrite it (mcdmactl fabric-key new "
                        "--force replaces it, and every host of the fabric then needs the new "
                        "key)");
    }
    return CreateError(errno, path);
  }
  Status st = FillKeyFile(fd.get(), path);
  if (st.ok() && fd.Close() != 0) st = SysError("close", errno, path);
  if (!st.ok()) {
    ::unlink(path.c_str());
    return st;
  }
  return SyncDir(ParentDir(path));
}

Status ReplaceAtomically(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return Status(Code::kInvalid, Prefix(path) + " is a directory; refusing to replace it");
  }
  uint8_t suffix[8];
  if (RAND_bytes(suffix, sizeof(suffix)) != 1) {
    return Status(Code::kInternal, "RAND_bytes failed: the OS random source is unavailable");
  }
  std::string tmp = path + ".tmp-";
  for (uint8_t b : suffix) {
    tmp.push_back(kHexDigits[b >> 4]);
    tmp.push_back(kHexDigits[b & 15]);
  }
  Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (fd.get() < 0) return CreateError(errno, path);
  Status result = FillKeyFile(fd.get(), tmp);
  if (result.ok() && fd.Close() != 0) result = SysError("close", errno, tmp);
  if (result.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    result = SysError("rename", errno, tmp + " -> " + path);
  }
  if (!result.ok()) {
    ::unlink(tmp.c_str());
    return result;
  }
  return SyncDir(ParentDir(path));
}

}  // namespace

Result<FabricKey> FabricKey::Generate() {
  FabricKey key;
  if (RAND_bytes(key.bytes_.data(), static_cast<int>(key.bytes_.size())) != 1) {
    return Status(Code::kInternal, "RAND_bytes failed: the OS random source is unavailable");
  }
  key.empty_ = false;
  return key;
}

FabricKey FabricKey::FromBytes(const std::array<uint8_t, kBytes>& bytes) {
  FabricKey key;
  key.bytes_ = bytes;
  key.empty_ = false;
  return key;
}

FabricKey::FabricKey(FabricKey&& other) noexcept : bytes_(other.bytes_), empty_(other.empty_) {
  other.Wipe();
}

FabricKey& FabricKey::operator=(FabricKey&& other) noexcept {
  if (this != &other) {
    bytes_ = other.bytes_;
    empty_ = other.empty_;
    other.Wipe();
  }
  return *this;
}

FabricKey::~FabricKey() { Wipe(); }

void FabricKey::Wipe() {
  OPENSSL_cleanse(bytes_.data(), bytes_.size());
  empty_ = true;
}

std::string FabricKey::Fingerprint() const {
  std::array<uint8_t, SHA256_DIGEST_LENGTH> digest{};
  SHA256(bytes_.data(), bytes_.size(), digest.data());
  std::string out;
  for (size_t i = 0; i < 4; ++i) {
    out.push_back(kHexDigits[digest[i] >> 4]);
    out.push_back(kHexDigits[digest[i] & 15]);
  }
  return out;
}

Result<FabricKey> LoadFabricKey(const std::string& path) {
  struct stat st {};
  // lstat first only for a precise message about symlinks; the authoritative
  // checks below run on the descriptor actually read.
  if (::lstat(path.c_str(), &st) != 0) return PathError("lstat", errno, path);
  MCDMA_RETURN_IF_ERROR(CheckFileStat(st, path));
  // O_NONBLOCK: a FIFO swapped in after lstat must not hang the open.
  Fd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (fd.get() < 0) return PathError("open", errno, path);
  if (::fstat(fd.get(), &st) != 0) return SysError("fstat", errno, path);
  MCDMA_RETURN_IF_ERROR(CheckFileStat(st, path));
  if (st.st_size != static_cast<off_t>(kHexChars) &&
      st.st_size != static_cast<off_t>(kHexChars + 1)) {
    return SizeError(path, static_cast<long long>(st.st_size));
  }
  // One byte of room beyond the longest valid content detects a file that
  // grew after fstat.
  SecretBuffer<kHexChars + 2> text;
  size_t len = 0;
  while (len < text.bytes.size()) {
    const ssize_t n = ::read(fd.get(), text.bytes.data() + len, text.bytes.size() - len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return SysError("read", errno, path);
    }
    if (n == 0) break;
    len += static_cast<size_t>(n);
  }
  return ParseKeyText(text.bytes.data(), len, path);
}

Status WriteNewFabricKey(const std::string& path, bool force) {
  if (path.empty()) return Status(Code::kInvalid, "fabric key path is empty");
  return force ? ReplaceAtomically(path) : CreateExclusive(path);
}

}  // namespace mcdma
