// The hand-offs between libmcdma's threads and Python threads.
//
// Library threads (progress, handler workers, whoever reaps a completion)
// never take the GIL: they push into these queues and Python threads pop
// (with the GIL released while they wait). See gil.hpp.
//
//  * CallQueue: incoming calls and notifications for Python handlers. A
//    library handler thread pushes one and waits until a Python dispatcher
//    thread answers it, the caller's deadline passes, or the queue closes
//    (Client.close): then it answers CANCELLED / TIMEOUT itself, so closing
//    never waits for Python.
//  * CompletionQueue: results of async operations, for the thread that
//    completes Python futures. It ends (Next() returns nullopt) only once it
//    is closed and every expected completion has been popped.
//  * NotifyQueue: a subscription's notifications (Client.subscribe); no
//    Python thread involved, the subscriber pops.
//
// All three are thread-safe; every member is GUARDED_BY(mu_).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "mcdma/client.hpp"
#include "mcdma/status.hpp"

namespace mcdma::python {

using Clock = std::chrono::steady_clock;

// One incoming call or notification, shared by the library thread that
// waits for the answer and the Python thread that computes it.
struct IncomingCall {
  uint64_t token = 0;  // which Python handler (mcdma/_dispatch.py)
  std::string service;
  uint64_t service_id = 0;
  std::string payload;
  bool one_way = false;
  std::chrono::microseconds time_left{0};  // the caller's, on arrival
  Clock::time_point arrived;
  // The answer; GUARDED_BY(CallQueue::mu_).
  bool answered = false;
  bool abandoned = false;  // the library thread stopped waiting
  Status status;           // not OK: answer with this error
  std::string reply;
};

class CallQueue {
 public:
  // Library handler thread: queues `call` and waits for its answer until
  // `deadline` (nullopt: none) or Close(). True when Python answered
  // (call->status and call->reply are then final).
  bool Handoff(const std::shared_ptr<IncomingCall>& call,
               std::optional<Clock::time_point> deadline);
  // Python thread (GIL released): the next call, or null once closed.
  std::shared_ptr<IncomingCall> Next();
  // Python thread: the answer; ignored once the library thread gave up.
  void Answer(IncomingCall& call, Status status, std::string reply);
  // Wakes every waiter; Handoff returns false from now on.
  void Close();
  bool closed();

 private:
  std::mutex mu_;
  std::condition_variable ready_cv_;     // a call was queued, or closed
  std::condition_variable answered_cv_;  // an answer came, or closed
  std::deque<std::shared_ptr<IncomingCall>> queue_;
  bool closed_ = false;
};

// The result of one async operation.
struct Completion {
  uint64_t token = 0;  // which Python future
  Status status;
  bool has_payload = false;  // a call's reply (else a transfer's bytes)
  std::string payload;
  uint64_t bytes = 0;
  // A transfer's local buffer, kept mapped until the completion is popped
  // (dropped on the Python thread, not on the library's progress thread).
  Buffer keep_alive;
};

class CompletionQueue {
 public:
  // Before starting an operation whose completion will be pushed; false
  // once closed (then start nothing: nobody would deliver it).
  bool Expect();
  // Any thread, never blocks on Python.
  void Push(Completion c);
  // Python thread (GIL released): the next completion; nullopt once closed
  // and every expected completion has been popped.
  std::optional<Completion> Next();
  void Close();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Completion> queue_;
  uint64_t outstanding_ = 0;  // expected and not yet popped
  bool closed_ = false;
};

class NotifyQueue {
 public:
  // `max_pending` 0: unbounded; else newer notifications are dropped (and
  // counted) while that many wait.
  explicit NotifyQueue(size_t max_pending) : max_pending_(max_pending) {}
  // Library handler thread; never blocks.
  void Push(std::string payload);
  // Subscriber (GIL released): the oldest notification; a Status of TIMEOUT
  // when none came within `timeout` (nullopt: wait without limit), or of
  // CANCELLED once closed and drained.
  Result<std::string> Pop(std::optional<std::chrono::milliseconds> timeout);
  void Close(std::string why);
  size_t pending();
  uint64_t dropped();
  bool closed();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  size_t max_pending_;
  uint64_t dropped_ = 0;
  bool closed_ = false;
  std::string why_closed_;
};

}  // namespace mcdma::python
