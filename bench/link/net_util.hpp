// What the raw-socket roles of mcdma_bench_link share: a failed socket
// call as a Status (a receive timeout reads as TIMEOUT), and an IPv4
// address with a port.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "mcdma/status.hpp"

namespace mcdma::bench {

inline mcdma::Status SysError(const std::string& call) {
  if (errno == EAGAIN || errno == EWOULDBLOCK) {
    return mcdma::Status(mcdma::Code::kTimeout, call + ": peer did not answer within the deadline");
  }
  return mcdma::Status(mcdma::Code::kSystem, call + ": " + strerror(errno));
}

inline mcdma::Result<sockaddr_in> ParseAddress(const std::string& host, uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &sa.sin_addr) != 1)
    return mcdma::Status(mcdma::Code::kInvalid, "not an IPv4 address: " + host);
  return sa;
}

}  // namespace mcdma::bench
