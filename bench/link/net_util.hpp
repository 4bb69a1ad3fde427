// What the raw-socket roles of mcdma_bench_link share: a failed socket
// call as a Status (a receive timeout reads as TIMEOUT), an IPv4 address
// with a port, and reading an exact number of bytes.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstddef>
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

// Reads exactly `size` bytes; EOF before the first byte is kPeerGone.
inline mcdma::Status RecvAll(int fd, std::byte* data, size_t size) {
  size_t have = 0;
  while (have < size) {
    ssize_t n = recv(fd, data + have, size - have, MSG_WAITALL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return SysError("recv");
    if (n == 0) {
      return mcdma::Status(have == 0 ? mcdma::Code::kPeerGone : mcdma::Code::kInternal,
                           "peer closed the connection");
    }
    have += static_cast<size_t>(n);
  }
  return mcdma::Status::Ok();
}

}  // namespace mcdma::bench
