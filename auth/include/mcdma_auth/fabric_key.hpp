// The fabric key: the 32-byte secret every daemon of one fabric shares, with
// which the daemons prove themselves to each other (see peer_auth.hpp).
//
// File format (the only one accepted): the key's 32 bytes as 64 hex digits
// (either case), optionally followed by one "\n". `mcdmactl fabric-key new`
// writes lowercase hex and the newline; `openssl rand -hex 32 > PATH`
// produces the same format. Text, so it survives copy-paste, config
// management and editors; one format, so a stray newline or a raw 32-byte
// file is never silently taken for a different key.
//
// The file must be a regular file (not a symlink), owned by the daemon's
// effective uid, with no group/other permission bits (0600 or 0400).
// LoadFabricKey refuses anything else with a message naming the path and the
// fix; the checks run on the opened descriptor, so nothing can be swapped in
// between check and read.
//
// Secrecy: a FabricKey zeroes its bytes when destroyed or moved from, has no
// operator<< and no accessor that formats the bytes. Log Fingerprint()
// instead: the first 8 hex digits of SHA-256(key), enough for operators to
// see whether two hosts hold the same key, useless for recovering it.
//
// Thread safety: a const FabricKey may be read from any thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "mcdma/status.hpp"

namespace mcdma {

class FabricKey {
 public:
  static constexpr size_t kBytes = 32;

  // 32 bytes from the OpenSSL CSPRNG; kInternal if it fails.
  static Result<FabricKey> Generate();
  // A key from its raw bytes (tests, and keys received by other means).
  static FabricKey FromBytes(const std::array<uint8_t, kBytes>& bytes);

  FabricKey(FabricKey&& other) noexcept;
  FabricKey& operator=(FabricKey&& other) noexcept;
  FabricKey(const FabricKey&) = delete;
  FabricKey& operator=(const FabricKey&) = delete;
  ~FabricKey();

  // The raw key, for HMAC. A moved-from key reads as 32 zero bytes and
  // empty() is true; never use one.
  const uint8_t* data() const { return bytes_.data(); }
  static constexpr size_t size() { return kBytes; }
  bool empty() const { return empty_; }

  // First 8 lowercase hex digits of SHA-256(key), e.g. "3fa9c01b".
  std::string Fingerprint() const;

 private:
  FabricKey() = default;
  void Wipe();

  std::array<uint8_t, kBytes> bytes_{};
  bool empty_ = true;
};

// Reads and checks the key file at `path` (see the file format above).
// Failures, each naming the path and what to do:
//   NOT_FOUND          no such file
//   PERMISSION_DENIED  mode has group/other bits, owned by another uid, or
//                      the file cannot be opened (EACCES)
//   INVALID            a symlink, a directory or other non-regular file, or
//                      content that is not 64 hex digits [+ "\n"]
//   SYSTEM             any other system call failure (call name + errno)
Result<FabricKey> LoadFabricKey(const std::string& path);

// Writes a fresh random key to `path` in the file format above, mode 0600
// (regardless of umask), fsync'd together with its directory. Read it back
// with LoadFabricKey (mcdmactl does, to print the fingerprint).
//   force=false: created with O_CREAT|O_EXCL; ALREADY_EXISTS if anything
//                (file, symlink, directory) is at `path`. On a failed write
//                the partial file is removed.
//   force=true:  written to a temporary file in the same directory and
//                renamed over `path`, so `path` always holds either the old
//                key or the complete new one (a symlink at `path` is
//                replaced, not followed; a directory is refused).
// Other failures: SYSTEM (call name + errno), PERMISSION_DENIED (EACCES),
// NOT_FOUND (the directory does not exist), INTERNAL (the CSPRNG failed).
Status WriteNewFabricKey(const std::string& path, bool force);

}  // namespace mcdma
