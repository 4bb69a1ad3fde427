// The ZeroMQ baseline of mcdma_bench_link: a REP server and a REQ client
// over TCP (libzmq's C API; it sets TCP_NODELAY itself). Built only when
// CMake finds libzmq; otherwise both roles fail with the reason and the
// orchestrator reports the row as skipped.
#include <poll.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include "link_roles.hpp"

#ifdef MCDMA_BENCH_HAVE_ZMQ
#include <zmq.h>

#include "harness/round_trips.hpp"
#endif

namespace mcdma::bench {

#ifdef MCDMA_BENCH_HAVE_ZMQ

using harness::ByteView;
using harness::MeasureRoundTrips;
using harness::RunClientPayloads;
using harness::SignalReadyPort;

const bool kHaveZmq = true;

namespace {

// How often an idle server looks at its lifeline and its run limit.
constexpr int kServerPollMs = 200;

mcdma::Status ZmqError(const std::string& call) {
  if (zmq_errno() == EAGAIN) {
    return mcdma::Status(mcdma::Code::kTimeout, call + ": peer did not answer within the deadline");
  }
  return mcdma::Status(mcdma::Code::kSystem, call + ": " + zmq_strerror(zmq_errno()));
}

// One context and socket, closed in reverse order; LINGER 0 so closing
// never waits for unsent messages.
class ZmqSocket {
 public:
  explicit ZmqSocket(int type) : ctx_(zmq_ctx_new()) {
    if (ctx_ != nullptr) sock_ = zmq_socket(ctx_, type);
    int zero = 0;
    if (sock_ != nullptr) zmq_setsockopt(sock_, ZMQ_LINGER, &zero, sizeof(zero));
  }
  ~ZmqSocket() {
    if (sock_ != nullptr) zmq_close(sock_);
    if (ctx_ != nullptr) zmq_ctx_term(ctx_);
  }
  ZmqSocket(const ZmqSocket&) = delete;
  ZmqSocket& operator=(const ZmqSocket&) = delete;
  void* get() const { return sock_; }
  mcdma::Status SetInt(int option, int value, const char* name) {
    if (zmq_setsockopt(sock_, option, &value, sizeof(value)) != 0) return ZmqError(name);
    return mcdma::Status::Ok();
  }

 private:
  void* ctx_ = nullptr;
  void* sock_ = nullptr;
};

bool LifelineClosed(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 0) != 0;
}

}  // namespace

int RunZmqServer(const LinkRoleOptions& options) {
  ZmqSocket rep(ZMQ_REP);
  if (rep.get() == nullptr) return FailRole(options, ZmqError("zmq_socket"));
  mcdma::Status st = rep.SetInt(ZMQ_RCVTIMEO, kServerPollMs, "ZMQ_RCVTIMEO");
  if (!st.ok()) return FailRole(options, st);
  std::string bind = "tcp://" + options.address + ":*";
  if (zmq_bind(rep.get(), bind.c_str()) != 0) return FailRole(options, ZmqError("zmq_bind"));
  char endpoint[256];
  size_t len = sizeof(endpoint);
  if (zmq_getsockopt(rep.get(), ZMQ_LAST_ENDPOINT, endpoint, &len) != 0)
    return FailRole(options, ZmqError("ZMQ_LAST_ENDPOINT"));
  const char* colon = strrchr(endpoint, ':');
  uint16_t port = 0;
  if (colon != nullptr) std::from_chars(colon + 1, colon + strlen(colon), port);
  SignalReadyPort(options.ready_fd, port);

  zmq_msg_t msg;
  zmq_msg_init(&msg);
  auto deadline = Clock::now() + std::chrono::milliseconds(options.run_limit_ms);
  int rc = 0;
  while (Clock::now() < deadline && !LifelineClosed(options.lifeline_fd)) {
    if (zmq_msg_recv(&msg, rep.get(), 0) < 0) {
      if (zmq_errno() == EAGAIN || zmq_errno() == EINTR) continue;
      rc = FailRole(options, ZmqError("zmq_msg_recv"));
      break;
    }
    // zmq_msg_send hands the message back to libzmq (msg is then empty),
    // so the request bytes go out as the reply without a copy.
    if (zmq_msg_send(&msg, rep.get(), 0) < 0) {
      rc = FailRole(options, ZmqError("zmq_msg_send"));
      break;
    }
  }
  zmq_msg_close(&msg);
  return rc;
}

int RunZmqClient(const LinkRoleOptions& options) {
  ZmqSocket req(ZMQ_REQ);
  if (req.get() == nullptr) return FailRole(options, ZmqError("zmq_socket"));
  for (int option : {ZMQ_SNDTIMEO, ZMQ_RCVTIMEO}) {
    mcdma::Status st = req.SetInt(option, options.timeout_ms, "ZMQ_SNDTIMEO/RCVTIMEO");
    if (!st.ok()) return FailRole(options, st);
  }
  std::string target = "tcp://" + options.address;
  if (zmq_connect(req.get(), target.c_str()) != 0)
    return FailRole(options, ZmqError("zmq_connect " + target));
  // One reply message, reused: each receive releases the previous reply.
  zmq_msg_t reply;
  zmq_msg_init(&reply);
  auto round_trip = [&](std::span<const std::byte> request) -> mcdma::Result<ByteView> {
    if (zmq_send(req.get(), request.data(), request.size(), 0) < 0) return ZmqError("zmq_send");
    if (zmq_msg_recv(&reply, req.get(), 0) < 0) return ZmqError("zmq_msg_recv");
    return ByteView{{static_cast<const std::byte*>(zmq_msg_data(&reply)), zmq_msg_size(&reply)}};
  };
  int rc = RunClientPayloads(options, [&](size_t payload) {
    return MeasureRoundTrips(payload, options.warmup, options.iterations, round_trip);
  });
  zmq_msg_close(&reply);
  return rc;
}

#else  // !MCDMA_BENCH_HAVE_ZMQ

const bool kHaveZmq = false;

int RunZmqServer(const LinkRoleOptions& options) {
  return FailRole(options, mcdma::Status(mcdma::Code::kUnavailable, "built without libzmq"));
}
int RunZmqClient(const LinkRoleOptions& options) { return RunZmqServer(options); }

#endif

}  // namespace mcdma::bench
