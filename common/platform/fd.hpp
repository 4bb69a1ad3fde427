// An owned file descriptor: move-only, closed on destruction. The one OS
// handle type every platform file and transport shares.
//
// Threading: an Fd belongs to whoever holds it.
#pragma once

#include <unistd.h>

#include <utility>

namespace mcdma::platform {

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { Reset(); }
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void Reset() {
    if (fd_ >= 0) ::close(std::exchange(fd_, -1));
  }
  // Closes now and reports close's result (a write error can surface
  // there); the Fd is then empty.
  int Close() { return fd_ >= 0 ? ::close(std::exchange(fd_, -1)) : 0; }
  // Gives up ownership without closing.
  int Release() { return std::exchange(fd_, -1); }

 private:
  int fd_ = -1;
};

}  // namespace mcdma::platform
