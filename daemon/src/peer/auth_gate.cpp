#include "peer/auth_gate.hpp"

#include <algorithm>
#include <utility>

namespace mcdma::daemon {

AuthGate::AuthGate(uint32_t per_address, std::chrono::milliseconds stage_timeout)
    : per_address_(std::max<uint32_t>(per_address, 1)), stage_timeout_(stage_timeout) {
  thread_ = std::thread([this] { Run(); });
}

AuthGate::~AuthGate() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::string AuthGate::AddressOf(const std::string& grpc_peer) {
  std::string s = grpc_peer;
  if (auto colon = s.find(':');
      colon != std::string::npos && (s.rfind("ipv4:", 0) == 0 || s.rfind("ipv6:", 0) == 0)) {
    s = s.substr(colon + 1);
  }
  if (!s.empty() && s.front() == '[') {
    auto close = s.find(']');
    return close == std::string::npos ? s : s.substr(1, close - 1);
  }
  auto last = s.rfind(':');
  return last == std::string::npos ? s : s.substr(0, last);
}

std::optional<AuthGate::Pass> AuthGate::Admit(grpc::ServerContext* ctx) {
  std::string address = AddressOf(ctx->peer());
  MutexLock lock(mu_);
  uint32_t& from = per_address_open_[address];
  if (entries_.size() >= kMaxAuthenticating || from >= per_address_) {
    if (from == 0) per_address_open_.erase(address);
    ++refused_;
    return std::nullopt;
  }
  ++from;
  uint64_t id = next_id_++;
  entries_[id] = Entry{ctx, address, std::chrono::steady_clock::now() + stage_timeout_, false};
  cv_.notify_all();
  return Pass(this, id);
}

void AuthGate::Release(uint64_t id) {
  MutexLock lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  auto from = per_address_open_.find(it->second.address);
  if (from != per_address_open_.end() && --from->second == 0) per_address_open_.erase(from);
  entries_.erase(it);
}

AuthGate::Pass::Pass(Pass&& other) noexcept
    : gate_(std::exchange(other.gate_, nullptr)), id_(other.id_) {}

AuthGate::Pass::~Pass() {
  if (gate_ != nullptr) gate_->Release(id_);
}

void AuthGate::Pass::NextStage() {
  MutexLock lock(gate_->mu_);
  auto it = gate_->entries_.find(id_);
  if (it != gate_->entries_.end() && !it->second.timed_out) {
    it->second.deadline = std::chrono::steady_clock::now() + gate_->stage_timeout_;
  }
  gate_->cv_.notify_all();
}

bool AuthGate::Pass::timed_out() const {
  MutexLock lock(gate_->mu_);
  auto it = gate_->entries_.find(id_);
  return it != gate_->entries_.end() && it->second.timed_out;
}

AuthFigures AuthGate::figures() const {
  MutexLock lock(mu_);
  return AuthFigures{static_cast<uint32_t>(entries_.size()), refused_, timed_out_};
}

void AuthGate::Run() {
  MutexLock lock(mu_);
  while (!stop_) {
    auto now = std::chrono::steady_clock::now();
    auto next = now + std::chrono::seconds(60);
    for (auto& [id, e] : entries_) {
      if (e.timed_out) continue;
      if (e.deadline <= now) {
        // Cancelling under the lock: the handler cannot have returned (its
        // pass, which it holds until then, would have removed the entry).
        e.timed_out = true;
        ++timed_out_;
        e.ctx->TryCancel();
      } else {
        next = std::min(next, e.deadline);
      }
    }
    cv_.wait_until(lock.native(), next);
  }
}

}  // namespace mcdma::daemon
