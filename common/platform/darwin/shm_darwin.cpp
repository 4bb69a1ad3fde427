#include <sys/sysctl.h>

#include <cstdint>

#include "platform/shm.hpp"

namespace mcdma::platform {

// macOS: shm objects are VM memory objects sized once by ftruncate; there
// is no filesystem behind them to run out of (see shm.hpp).
Status ReserveSharedMemory(int /*fd*/, uint64_t /*bytes*/, const std::string& /*name*/) {
  return Status::Ok();
}

uint64_t SharedMemoryCapacity() {
  uint64_t memsize = 0;
  size_t len = sizeof(memsize);
  if (sysctlbyname("hw.memsize", &memsize, &len, nullptr, 0) != 0) return 0;
  return memsize / 2;
}

uint64_t SharedMemoryFree() { return SharedMemoryCapacity(); }

// macOS has no namespace of shm objects to read (no /dev/shm, no call that
// lists them).
std::vector<std::string> ListSharedMemory(const std::string& /*prefix*/) { return {}; }

}  // namespace mcdma::platform
