// Backing store for a shared-memory segment, reserved up front
// (linux/shm_linux.cpp, darwin/shm_darwin.cpp).
//
// On Linux a POSIX shm object is a file on a tmpfs (/dev/shm) that any
// local user, or a large KV cache, can fill; ftruncate only sets the size,
// and the first write to a page that finds the filesystem full is SIGBUS.
// Reserving the pages at creation (posix_fallocate) turns that into an
// error the caller can report. macOS shm objects are VM memory objects
// with no filesystem behind them to fill: reservation is the ftruncate
// itself, and nothing more is done there.
//
// Threading: free functions, no shared state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mcdma/status.hpp"

namespace mcdma::platform {

// Reserves `bytes` of backing store for the shm object open as `fd`
// (already sized to `bytes`). A full filesystem is NO_MEMORY with reason
// SHM_FULL, naming `name`; another failure is a SysError.
Status ReserveSharedMemory(int fd, uint64_t bytes, const std::string& name);

// How much shared memory the system offers in all: the size of /dev/shm on
// Linux, half the physical memory on macOS. 0 when it cannot be read.
uint64_t SharedMemoryCapacity();
// How much of it is free now (macOS: the capacity). 0 when unknown.
uint64_t SharedMemoryFree();

// The names ("/NAME") of the shm objects that exist now whose names start
// with "/" + `prefix`: the entries of /dev/shm on Linux. macOS offers no
// way to list shm objects: there the list is always empty.
std::vector<std::string> ListSharedMemory(const std::string& prefix);

}  // namespace mcdma::platform
