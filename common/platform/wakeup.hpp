// A cross-thread wake-up that a poller (or poll(2)) can wait on: an eventfd
// on Linux (linux/wakeup_linux.cpp), a non-blocking pipe on macOS
// (darwin/wakeup_darwin.cpp). Signals coalesce: any number of Signal()
// calls before a Drain() make the fd readable once.
//
// Threading: Signal from any thread; fd/Drain from the waiting thread.
#pragma once

#include "mcdma/status.hpp"
#include "platform/fd.hpp"

namespace mcdma::platform {

class Wakeup {
 public:
  // SysError naming eventfd / pipe (EMFILE, ENFILE).
  static Result<Wakeup> Create();

  Wakeup() = default;
  Wakeup(Wakeup&&) noexcept = default;
  Wakeup& operator=(Wakeup&&) noexcept = default;

  bool valid() const { return read_.valid(); }
  // The fd to wait on for reading.
  int fd() const { return read_.get(); }
  // Makes fd() readable. Never blocks: a full pipe already is readable.
  void Signal() const;
  // Consumes every pending signal; fd() is not readable afterwards until
  // the next Signal().
  void Drain() const;

 private:
  Fd read_;
  Fd write_;  // the pipe's write end on macOS; unused (invalid) with eventfd
};

}  // namespace mcdma::platform
