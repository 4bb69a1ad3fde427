// Rendezvous: accepted sockets meet the endpoints waiting for them.
#include "driver/tcp/tcp_shared.hpp"

#include <utility>

namespace mcdma::driver::tcp {

void Rendezvous::Open(const Token& token) {
  MutexLock lock(mu_);
  if (!shut_) slots_.try_emplace(token);
}

void Rendezvous::Close(const Token& token) {
  Fd parked;
  {
    MutexLock lock(mu_);
    auto it = slots_.find(token);
    if (it == slots_.end()) return;
    parked = std::move(it->second.fd);
    slots_.erase(it);
  }
  // `parked` closes here, outside the lock.
}

bool Rendezvous::Offer(const Token& target, const Token& sender, Fd& fd) {
  {
    MutexLock lock(mu_);
    auto it = slots_.find(target);
    if (shut_ || it == slots_.end() || it->second.fd.valid()) return false;
    it->second.fd = std::move(fd);
    it->second.sender = sender;
  }
  arrived_.notify_all();
  return true;
}

Result<Rendezvous::Arrival> Rendezvous::Await(const Token& token, Deadline deadline) {
  MutexLock lock(mu_);
  for (;;) {
    if (shut_) return Status(Code::kLinkDown, "Connect: the tcp device is shutting down");
    auto it = slots_.find(token);
    if (it == slots_.end()) return Status(Code::kInvalid, "Connect: endpoint is not open");
    if (it->second.fd.valid()) {
      Arrival arrival{.fd = std::move(it->second.fd), .sender = it->second.sender};
      return arrival;
    }
    if (arrived_.wait_until(lock.native(), deadline) == std::cv_status::timeout &&
        std::chrono::steady_clock::now() >= deadline) {
      return Status(Code::kTimeout, "Connect: the peer did not dial in before the timeout");
    }
  }
}

void Rendezvous::Shutdown() {
  std::map<Token, Slot> closing;
  {
    MutexLock lock(mu_);
    shut_ = true;
    closing.swap(slots_);
  }
  arrived_.notify_all();
}

}  // namespace mcdma::driver::tcp
