// The socket-based baselines: a Unix stream socket ping-pong and a gRPC
// unary echo over a Unix socket. Both block in the kernel while waiting
// (no spinning), which is what makes them cheap on CPU and costly in wake-ups.
#include "baselines.hpp"

#include <grpcpp/grpcpp.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "echo.grpc.pb.h"
#include "harness/round_trips.hpp"
#include "platform/socket.hpp"

namespace mcdma::bench {

using harness::ByteView;
using harness::Fail;
using harness::MeasureRoundTrips;
using harness::RunClientPayloads;
using harness::SignalReady;
using harness::SignalReadyPort;
using harness::WaitForLifeline;

namespace {

// Frames are a u32 length then the payload. The largest frame any run sends
// bounds a peer's claim, so a corrupt length cannot make us allocate.
constexpr uint32_t kMaxFrame = 64u << 20;

mcdma::Status SockError(const char* call) {
  // EAGAIN from a blocking socket means SO_RCVTIMEO/SO_SNDTIMEO expired.
  if (errno == EAGAIN || errno == EWOULDBLOCK) {
    return mcdma::Status(mcdma::Code::kTimeout,
                         std::string(call) + ": peer did not answer within the deadline");
  }
  return mcdma::Status(mcdma::Code::kSystem, std::string(call) + ": " + strerror(errno));
}

}  // namespace

mcdma::Status SetSocketTimeouts(int fd, std::chrono::milliseconds timeout) {
  timeval tv{static_cast<time_t>(timeout.count() / 1000),
             static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
  if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0) {
    return SockError("setsockopt");
  }
  return mcdma::Status::Ok();
}

// Reads one whole frame into `buf` (resized to hold it). Usually one recv:
// the peer wrote the frame with one send. kPeerGone only for a clean EOF
// between frames (the client is done); EOF inside a frame is kInternal.
mcdma::Result<uint32_t> ReadFrame(int fd, std::vector<std::byte>& buf,
                                  std::chrono::microseconds spin) {
  size_t have = 0;
  size_t want = sizeof(uint32_t);
  for (;;) {
    if (buf.size() < want) buf.resize(want);
    ssize_t n = -1;
    if (spin.count() > 0) {
      auto until = std::chrono::steady_clock::now() + spin;
      do {
        n = recv(fd, buf.data() + have, buf.size() - have, MSG_DONTWAIT);
        if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) break;
        std::this_thread::yield();
      } while (std::chrono::steady_clock::now() < until);
    }
    if (n < 0 && (spin.count() == 0 || errno == EAGAIN || errno == EWOULDBLOCK))
      n = recv(fd, buf.data() + have, buf.size() - have, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return SockError("recv");
    if (n == 0) {
      if (have == 0) return mcdma::Status(mcdma::Code::kPeerGone, "peer closed the socket");
      return mcdma::Status(mcdma::Code::kInternal, "peer closed the socket mid-frame");
    }
    have += static_cast<size_t>(n);
    if (have < sizeof(uint32_t)) continue;
    uint32_t length;
    std::memcpy(&length, buf.data(), sizeof(length));
    if (length > kMaxFrame)
      return mcdma::Status(mcdma::Code::kOutOfRange, "frame length out of range");
    want = sizeof(uint32_t) + length;
    if (have >= want) return length;
  }
}

mcdma::Status WriteAll(int fd, const std::byte* data, size_t size) {
  while (size > 0) {
    ssize_t n = mcdma::platform::SendNoSignal(fd, data, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return SockError("send");
    data += n;
    size -= static_cast<size_t>(n);
  }
  return mcdma::Status::Ok();
}

namespace {

// gRPC's reply owns its bytes; the harness reads them through bytes().
struct OwnedReply {
  std::string payload;
  std::span<const std::byte> bytes() const {
    return {reinterpret_cast<const std::byte*>(payload.data()), payload.size()};
  }
};

class EchoService final : public mcdma::bench::v1::Echo::Service {
  grpc::Status Echo(grpc::ServerContext*, const mcdma::bench::v1::EchoRequest* request,
                    mcdma::bench::v1::EchoReply* reply) override {
    reply->set_payload(request->payload());
    return grpc::Status::OK;
  }
};

}  // namespace

int EchoFrames(const RoleOptions& options, int fd, std::chrono::microseconds spin) {
  std::vector<std::byte> buf;
  for (;;) {
    auto length = ReadFrame(fd, buf, spin);
    if (!length.ok()) {
      // The client closing between frames is the normal end of a run.
      if (length.status().code() == mcdma::Code::kPeerGone) return 0;
      return Fail(options, length.status());
    }
    mcdma::Status st = WriteAll(fd, buf.data(), sizeof(uint32_t) + *length);
    if (!st.ok()) return Fail(options, st);
  }
}

int TimeFrames(const RoleOptions& options, int fd, std::chrono::microseconds spin) {
  mcdma::Status st = SetSocketTimeouts(fd, std::chrono::milliseconds(options.timeout_ms));
  if (!st.ok()) return Fail(options, st);
  std::vector<std::byte> frame;
  std::vector<std::byte> reply;
  auto round_trip = [&](std::span<const std::byte> request) -> mcdma::Result<ByteView> {
    // Header and payload leave in one send, as a tuned framing layer would.
    uint32_t length = static_cast<uint32_t>(request.size());
    frame.resize(sizeof(length) + request.size());
    std::memcpy(frame.data(), &length, sizeof(length));
    std::memcpy(frame.data() + sizeof(length), request.data(), request.size());
    MCDMA_RETURN_IF_ERROR(WriteAll(fd, frame.data(), frame.size()));
    MCDMA_ASSIGN_OR_RETURN(uint32_t got, ReadFrame(fd, reply, spin));
    return ByteView{{reply.data() + sizeof(uint32_t), got}};
  };
  return RunClientPayloads(options, [&](size_t payload) {
    return MeasureRoundTrips(payload, options.warmup, options.iterations, round_trip);
  });
}

int RunUdsServer(const RoleOptions& options) {
  // Idle reads are bounded by the child's whole life (see RoleOptions).
  mcdma::Status st = SetSocketTimeouts(options.fd, std::chrono::milliseconds(options.run_limit_ms));
  if (!st.ok()) return Fail(options, st);
  SignalReady(options.ready_fd);
  return EchoFrames(options, options.fd);
}

int RunUdsClient(const RoleOptions& options) { return TimeFrames(options, options.fd); }

int RunGrpcEchoServer(const RoleOptions& options, const std::string& listen_uri, bool report_port) {
  EchoService service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen_uri, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || (report_port && port <= 0))
    return Fail(options,
                mcdma::Status(mcdma::Code::kUnavailable, "cannot listen on " + listen_uri));
  if (report_port) {
    SignalReadyPort(options.ready_fd, static_cast<uint16_t>(port));
  } else {
    SignalReady(options.ready_fd);
  }
  WaitForLifeline(options.lifeline_fd, std::chrono::milliseconds(options.run_limit_ms));
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  return 0;
}

int RunGrpcEchoClient(const RoleOptions& options, const std::string& target_uri) {
  // No HTTP proxy: an http_proxy in the environment must not put a proxy
  // hop into the measurement (or fail inside a network namespace).
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_ENABLE_HTTP_PROXY, 0);
  auto channel = grpc::CreateCustomChannel(target_uri, grpc::InsecureChannelCredentials(), args);
  auto connect_deadline =
      std::chrono::system_clock::now() + std::chrono::milliseconds(options.timeout_ms);
  if (!channel->WaitForConnected(connect_deadline)) {
    return Fail(options,
                mcdma::Status(mcdma::Code::kUnavailable, "cannot connect to " + target_uri));
  }
  auto stub = mcdma::bench::v1::Echo::NewStub(channel);
  mcdma::bench::v1::EchoRequest request;
  auto round_trip = [&](std::span<const std::byte> bytes) -> mcdma::Result<OwnedReply> {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::milliseconds(options.timeout_ms));
    request.set_payload(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    mcdma::bench::v1::EchoReply reply;
    grpc::Status st = stub->Echo(&context, request, &reply);
    if (!st.ok()) {
      auto code = st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED
                      ? mcdma::Code::kTimeout
                      : mcdma::Code::kUnavailable;
      return mcdma::Status(code, "gRPC Echo: " + st.error_message());
    }
    return OwnedReply{std::move(*reply.mutable_payload())};
  };
  return RunClientPayloads(options, [&](size_t payload) {
    return MeasureRoundTrips(payload, options.warmup, options.iterations, round_trip);
  });
}

int RunGrpcServer(const RoleOptions& options) {
  return RunGrpcEchoServer(options, "unix:" + options.socket, false);
}

int RunGrpcClient(const RoleOptions& options) {
  return RunGrpcEchoClient(options, "unix:" + options.socket);
}

}  // namespace mcdma::bench
