// The one helper every system call's failure goes through: it names the call
// and the errno, so a log line says exactly what failed.
#pragma once

#include <cerrno>
#include <string>

#include "mcdma/status.hpp"

namespace mcdma {

// Status(kSystem, "<call>: <strerror> (errno N)[: detail]").
Status SysError(const char* call, int err, const std::string& detail = {});

// 32 random bytes from the OS CSPRNG, hex-encoded (64 chars) if hex, else
// `bytes` random bytes hex-encoded. Used for tokens and segment names.
std::string RandomHex(size_t bytes);

}  // namespace mcdma
