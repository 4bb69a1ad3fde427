// _Core: calls, notifications, handlers and subscriptions (see core.hpp).
#include <string>
#include <utility>

#include "core.hpp"
#include "errors.hpp"
#include "gil.hpp"

namespace py = pybind11;

namespace mcdma::python {

py::bytes Core::Call(const std::string& service, const py::handle& data,
                     std::optional<double> timeout) {
  Client& c = Open();
  InputBytes in(data);
  auto ms = SecondsToMs(timeout);
  Message reply = Check(WithoutGil([&] { return c.Call(service, in.span(), ms); }));
  // One copy, out of the mailbox arena: the range goes back to the daemon
  // when `reply` is destroyed, and Python bytes may live for ever.
  return {reinterpret_cast<const char*>(reply.data()), reply.size()};
}

void Core::CallAsync(const std::string& service, const py::handle& data,
                     std::optional<double> timeout, uint64_t token) {
  Client& c = Open();
  InputBytes in(data);
  auto ms = SecondsToMs(timeout);
  auto completions = completions_;
  bool started = WithoutGil([&] {
    std::shared_lock lock(submit_mu_);
    if (!completions->Expect()) return false;
    Future<Message> f = c.CallAsync(service, in.span(), ms);
    // Runs on whichever thread reaps the completion (or here, at once):
    // copies the reply and queues it, never touching Python.
    f.Then([completions, token](Result<Message> r) {
      Completion done;
      done.token = token;
      if (r.ok()) {
        done.has_payload = true;
        done.payload.assign(r->view());
      } else {
        done.status = r.status();
      }
      completions->Push(std::move(done));
    });
    return true;
  });
  if (!started) throw StatusError(Status(Code::kUnavailable, "the client is closed"));
}

void Core::Notify(const std::string& service, const py::handle& data,
                  std::optional<double> timeout) {
  Client& c = Open();
  InputBytes in(data);
  auto ms = SecondsToMs(timeout);
  Check(WithoutGil([&] { return c.Notify(service, in.span(), ms); }));
}

uint64_t Core::Serve(const std::string& service, uint64_t token) {
  Client& c = Open();
  auto calls = calls_;
  // Runs on a library handler thread: hands the call to Python and waits
  // for the answer, bounded by the caller's deadline (a reply after it is
  // useless) and by Close().
  Handler handler = [calls, token, service](ServerCall& call) {
    auto in = std::make_shared<IncomingCall>();
    in->token = token;
    in->service = service;
    in->service_id = call.service_id();
    in->payload.assign(call.view());
    in->one_way = call.one_way();
    in->time_left = call.time_left();
    in->arrived = Clock::now();
    std::optional<Clock::time_point> deadline;
    if (!call.one_way() && call.time_left().count() > 0) deadline = in->arrived + call.time_left();
    bool answered = calls->Handoff(in, deadline);
    if (call.one_way()) return;
    if (!answered) {
      Status why = calls->closed()
                       ? Status(Code::kCancelled, "the serving client was closed")
                       : Status(Code::kTimeout, "the Python handler of '" + service +
                                                    "' did not answer before the deadline");
      (void)call.ReplyError(why);
      return;
    }
    // Final once answered (CallQueue::Answer ignores later answers).
    if (in->status.ok()) {
      (void)call.Reply(std::string_view(in->reply));
    } else {
      (void)call.ReplyError(in->status);
    }
  };
  return Check(WithoutGil([&] { return c.Serve(service, std::move(handler)); }));
}

std::shared_ptr<NotifyQueue> Core::Subscribe(const std::string& service, size_t max_pending,
                                             uint64_t* service_id) {
  Client& c = Open();
  auto queue = std::make_shared<NotifyQueue>(max_pending);
  // Runs on a library handler thread; never blocks.
  Handler handler = [queue, service](ServerCall& call) {
    if (!call.one_way()) {
      (void)call.ReplyError(Status(Code::kInvalid, "service '" + service +
                                                       "' is a subscription: it takes "
                                                       "notifications (notify), not calls"));
      return;
    }
    queue->Push(std::string(call.view()));
  };
  uint64_t id = Check(WithoutGil([&] { return c.Serve(service, std::move(handler)); }));
  {
    std::lock_guard lock(mu_);
    if (!closed_) {
      subs_[id] = queue;
      *service_id = id;
      return queue;
    }
  }
  queue->Close("the client was closed");
  *service_id = id;
  return queue;
}

void Core::Unserve(uint64_t service_id) {
  Client& c = Open();
  std::shared_ptr<NotifyQueue> sub;
  {
    std::lock_guard lock(mu_);
    if (auto it = subs_.find(service_id); it != subs_.end()) {
      sub = std::move(it->second);
      subs_.erase(it);
    }
  }
  Status st = WithoutGil([&] { return c.Unserve(service_id); });
  if (sub) sub->Close("the subscription was closed");
  Check(st);
}

}  // namespace mcdma::python

namespace mcdma::python {
namespace {

// A Python callable owned by library code: its last reference may be
// dropped on any thread, with or without the GIL.
struct PyRef {
  explicit PyRef(pybind11::function f) : fn(f.release().ptr()) {}
  PyRef(const PyRef&) = delete;
  PyRef& operator=(const PyRef&) = delete;
  ~PyRef() {
    if (Py_IsInitialized() == 0 || Finalizing()) return;  // the interpreter owns it now
    PyGILState_STATE g = PyGILState_Ensure();
    Py_DECREF(fn);
    PyGILState_Release(g);
  }
  PyObject* fn;
};

}  // namespace

uint64_t Core::ServeInline(const std::string& service, pybind11::function runner) {
  Client& c = Open();
  auto ref = std::make_shared<PyRef>(std::move(runner));
  // Runs on a library handler thread: the call's own thread runs the
  // Python handler (no hand-off to a Python thread, no second wake-up).
  Handler handler = [ref, token = uint64_t{0}, service](ServerCall& call) {
    if (Py_IsInitialized() == 0 || Finalizing()) {
      if (!call.one_way()) (void)call.ReplyError(Status(Code::kCancelled, "Python is exiting"));
      return;
    }
    auto in = std::make_shared<IncomingCall>();
    in->token = token;
    in->service = service;
    in->service_id = call.service_id();
    in->payload.assign(call.view());
    in->one_way = call.one_way();
    in->time_left = call.time_left();
    in->arrived = Clock::now();
    Status status;
    std::string reply;
    PyGILState_STATE g = PyGILState_Ensure();
    try {
      pybind11::object result = pybind11::reinterpret_borrow<pybind11::function>(ref->fn)(in);
      auto answer = result.cast<pybind11::tuple>();
      int code = answer[0].cast<int>();
      if (code != 0) {
        status = Status(CodeFromWire(static_cast<uint64_t>(code)), answer[1].cast<std::string>());
      } else if (!call.one_way()) {
        InputBytes bytes(answer[2]);
        reply.assign(reinterpret_cast<const char*>(bytes.span().data()), bytes.span().size());
      }
    } catch (pybind11::error_already_set& e) {
      status =
          Status(Code::kInternal, std::string("the inline handler's runner failed: ") + e.what());
    } catch (const std::exception& e) {
      status = Status(Code::kInternal, std::string("the inline handler's answer: ") + e.what());
    }
    PyGILState_Release(g);
    if (call.one_way()) return;
    (void)(status.ok() ? call.Reply(std::string_view(reply)) : call.ReplyError(status));
  };
  return Check(WithoutGil([&] { return c.Serve(service, std::move(handler)); }));
}

}  // namespace mcdma::python
