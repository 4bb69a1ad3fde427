// CallQueue, CompletionQueue and NotifyQueue (see queues.hpp).
#include "queues.hpp"

#include <algorithm>

namespace mcdma::python {

bool CallQueue::Handoff(const std::shared_ptr<IncomingCall>& call,
                        std::optional<Clock::time_point> deadline) {
  std::unique_lock lock(mu_);
  if (closed_) return false;
  queue_.push_back(call);
  ready_cv_.notify_one();
  auto done = [&] { return call->answered || closed_; };
  if (deadline) {
    answered_cv_.wait_until(lock, *deadline, done);
  } else {
    answered_cv_.wait(lock, done);
  }
  if (call->answered) return true;
  // Not answered: make sure no Python thread starts it late, and that a
  // late answer is dropped.
  call->abandoned = true;
  auto it = std::find(queue_.begin(), queue_.end(), call);
  if (it != queue_.end()) queue_.erase(it);
  return false;
}

std::shared_ptr<IncomingCall> CallQueue::Next() {
  std::unique_lock lock(mu_);
  ready_cv_.wait(lock, [&] { return closed_ || !queue_.empty(); });
  if (closed_) return nullptr;
  auto call = std::move(queue_.front());
  queue_.pop_front();
  return call;
}

void CallQueue::Answer(IncomingCall& call, Status status, std::string reply) {
  std::lock_guard lock(mu_);
  if (call.abandoned || call.answered) return;
  call.answered = true;
  call.status = std::move(status);
  call.reply = std::move(reply);
  answered_cv_.notify_all();
}

void CallQueue::Close() {
  std::lock_guard lock(mu_);
  closed_ = true;
  queue_.clear();
  ready_cv_.notify_all();
  answered_cv_.notify_all();
}

bool CallQueue::closed() {
  std::lock_guard lock(mu_);
  return closed_;
}

bool CompletionQueue::Expect() {
  std::lock_guard lock(mu_);
  if (closed_) return false;
  ++outstanding_;
  return true;
}

void CompletionQueue::Push(Completion c) {
  std::lock_guard lock(mu_);
  queue_.push_back(std::move(c));
  cv_.notify_one();
}

std::optional<Completion> CompletionQueue::Next() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return !queue_.empty() || (closed_ && outstanding_ == 0); });
  if (queue_.empty()) return std::nullopt;
  Completion c = std::move(queue_.front());
  queue_.pop_front();
  if (outstanding_ > 0) --outstanding_;
  return c;
}

void CompletionQueue::Close() {
  std::lock_guard lock(mu_);
  closed_ = true;
  cv_.notify_all();
}

void NotifyQueue::Push(std::string payload) {
  std::lock_guard lock(mu_);
  if (closed_) return;
  if (max_pending_ != 0 && queue_.size() >= max_pending_) {
    ++dropped_;
    return;
  }
  queue_.push_back(std::move(payload));
  cv_.notify_one();
}

Result<std::string> NotifyQueue::Pop(std::optional<std::chrono::milliseconds> timeout) {
  std::unique_lock lock(mu_);
  auto ready = [&] { return closed_ || !queue_.empty(); };
  if (timeout) {
    cv_.wait_for(lock, *timeout, ready);
  } else {
    cv_.wait(lock, ready);
  }
  if (!queue_.empty()) {
    std::string payload = std::move(queue_.front());
    queue_.pop_front();
    return payload;
  }
  if (closed_) return Status(Code::kCancelled, why_closed_);
  return Status(Code::kTimeout,
                "no notification within " + std::to_string(timeout ? timeout->count() : 0) + " ms");
}

void NotifyQueue::Close(std::string why) {
  std::lock_guard lock(mu_);
  if (closed_) return;
  closed_ = true;
  why_closed_ = std::move(why);
  cv_.notify_all();
}

size_t NotifyQueue::pending() {
  std::lock_guard lock(mu_);
  return queue_.size();
}

uint64_t NotifyQueue::dropped() {
  std::lock_guard lock(mu_);
  return dropped_;
}

bool NotifyQueue::closed() {
  std::lock_guard lock(mu_);
  return closed_;
}

}  // namespace mcdma::python
