// Who may be in the middle of authenticating, and for how long.
//
// Authenticate answers anyone, key or not, so it is bounded: at most
// kMaxAuthenticating exchanges at once in all and `per_address` from one
// address (a keyless client cannot take every slot from one host), and
// each stage (hello, then proof) must arrive within `stage_timeout`, after
// which the stream is cancelled. A real peer whose exchange is refused
// retries with backoff, as after any failed attempt.
//
// Threading: Admit and the passes from gRPC's threads; one timer thread
// cancels overdue streams. All mutable state under mu_.
#pragma once

#include <grpcpp/server_context.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "mcdma_internal/thread_annotations.hpp"

namespace mcdma::daemon {

inline constexpr uint32_t kMaxAuthenticating = 32;

struct AuthFigures {
  uint32_t in_progress = 0;
  uint64_t refused = 0;    // over the per-address or total limit
  uint64_t timed_out = 0;  // a stage's deadline passed
};

class AuthGate {
 public:
  AuthGate(uint32_t per_address, std::chrono::milliseconds stage_timeout);
  ~AuthGate();
  AuthGate(const AuthGate&) = delete;
  AuthGate& operator=(const AuthGate&) = delete;

  // One admitted exchange: its stage deadline runs from admission; Next()
  // starts the next stage's. Destroying it ends the exchange.
  class Pass {
   public:
    Pass(Pass&& other) noexcept;
    Pass& operator=(Pass&&) = delete;
    Pass(const Pass&) = delete;
    ~Pass();
    void NextStage() MCDMA_EXCLUDES(gate_->mu_);
    // Whether the deadline cancelled the stream.
    bool timed_out() const MCDMA_EXCLUDES(gate_->mu_);

   private:
    friend class AuthGate;
    Pass(AuthGate* gate, uint64_t id) : gate_(gate), id_(id) {}
    AuthGate* gate_;
    uint64_t id_;
  };

  // Admits an exchange from `ctx->peer()`, or returns nullopt (counted)
  // when the total or that address's limit is reached.
  std::optional<Pass> Admit(grpc::ServerContext* ctx) MCDMA_EXCLUDES(mu_);
  AuthFigures figures() const MCDMA_EXCLUDES(mu_);
  // "10.0.0.2" from gRPC's "ipv4:10.0.0.2:5123" ("[::1]" forms likewise).
  static std::string AddressOf(const std::string& grpc_peer);

 private:
  struct Entry {
    grpc::ServerContext* ctx = nullptr;
    std::string address;
    std::chrono::steady_clock::time_point deadline;
    bool timed_out = false;
  };
  void Run() MCDMA_EXCLUDES(mu_);
  void Release(uint64_t id) MCDMA_EXCLUDES(mu_);

  const uint32_t per_address_;
  const std::chrono::milliseconds stage_timeout_;
  mutable Mutex mu_;
  std::condition_variable cv_;
  bool stop_ MCDMA_GUARDED_BY(mu_) = false;
  uint64_t next_id_ MCDMA_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, Entry> entries_ MCDMA_GUARDED_BY(mu_);
  std::map<std::string, uint32_t> per_address_open_ MCDMA_GUARDED_BY(mu_);
  uint64_t refused_ MCDMA_GUARDED_BY(mu_) = 0;
  uint64_t timed_out_ MCDMA_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace mcdma::daemon
