// Files and paths for the tests and the benchmarks: a private scratch
// directory, whole files as text, the last lines of a text, programs on
// PATH or next to this one.
//
// Threading: TempDir belongs to its owner; the functions are thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "mcdma/status.hpp"

namespace mcdma::harness {

// A fresh private directory /tmp/PREFIX-XXXXXX (mode 0700) removed with
// everything in it on destruction. Unix socket paths live here, so it
// stays short. ok() is false when mkdtemp failed (error() says why).
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "mcdma-it");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  bool ok() const { return !path_.empty(); }
  const std::string& error() const { return error_; }
  const std::string& path() const { return path_; }
  std::string Join(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
  std::string error_;
};

// A whole file; "" when it cannot be read.
std::string ReadFile(const std::string& path);
// Writes `text` to `path` (created or truncated); kSystem naming the call
// that failed, a failed flush on close included.
Status WriteFile(const std::string& path, std::string_view text);
// kSystem "WHAT PATH: strerror(errno)".
Status FileError(const char* what, const std::string& path);

// The last non-empty line of `text`.
std::string LastLine(const std::string& text);
// The last `lines` non-empty lines of `text`, each ending in a newline.
std::string LastLines(const std::string& text, int lines);

// The first executable `name` on $PATH; "" when there is none.
std::string FindInPath(const std::string& name);
// Absolute path of the running executable (/proc/self/exe).
Result<std::string> SelfExePath();
// `relative` resolved against the directory holding `self`.
std::string NextTo(const std::string& self, const std::string& relative);

}  // namespace mcdma::harness
