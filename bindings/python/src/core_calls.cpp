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

// A Python object owned by library code: its last reference may be dropped
// on any thread, with or without the GIL.
struct PyRef {
  explicit PyRef(py::object o) : obj(o.release().ptr()) {}
  PyRef(const PyRef&) = delete;
  PyRef& operator=(const PyRef&) = delete;
  ~PyRef() {
    if (Py_IsInitialized() == 0 || Finalizing()) return;  // the interpreter owns it now
    PyGILState_STATE g = PyGILState_Ensure();
    Py_DECREF(obj);
    PyGILState_Release(g);
  }
  py::handle get() const { return obj; }
  PyObject* obj;
};

// One call of an inline service, run with the GIL held: the handler's
// answer as a status and reply bytes. Python runs only the handler itself
// and, when it raised, `on_error(info, exception) -> (code, message)`.
Status RunInline(const PyRef& handler, const PyRef& on_error, ServerCall& call,
                 const std::shared_ptr<IncomingCall>& in, std::string& reply) {
  py::object info = py::cast(in);
  py::object exception;
  try {
    py::bytes request(reinterpret_cast<const char*>(call.view().data()), call.view().size());
    py::object result = handler.get()(request, info);
    if (call.one_way() || result.is_none()) return Status::Ok();
    InputBytes bytes(result);  // raises TypeError for what is not bytes-like
    reply.assign(reinterpret_cast<const char*>(bytes.span().data()), bytes.span().size());
    return Status::Ok();
  } catch (py::error_already_set& e) {
    exception = e.value();
  } catch (const py::builtin_exception& e) {
    exception = py::reinterpret_borrow<py::object>(PyExc_TypeError)(e.what());
  }
  try {
    auto answer = on_error.get()(info, exception).cast<py::tuple>();
    return Status(CodeFromWire(answer[0].cast<uint64_t>()), answer[1].cast<std::string>());
  } catch (const std::exception& e) {
    return Status(Code::kInternal, std::string("the inline handler's error: ") + e.what());
  }
}

}  // namespace

uint64_t Core::ServeInline(const std::string& service, py::function handler,
                           py::function on_error) {
  Client& c = Open();
  auto fn = std::make_shared<PyRef>(std::move(handler));
  auto err = std::make_shared<PyRef>(std::move(on_error));
  // Runs on a library handler thread, which runs the Python handler itself
  // (no hand-off to a Python thread, no second wake-up).
  Handler run = [fn, err, service](ServerCall& call) {
    if (Py_IsInitialized() == 0 || Finalizing()) {
      if (!call.one_way()) (void)call.ReplyError(Status(Code::kCancelled, "Python is exiting"));
      return;
    }
    auto in = std::make_shared<IncomingCall>();
    in->service = service;
    in->service_id = call.service_id();
    in->one_way = call.one_way();
    in->time_left = call.time_left();
    in->arrived = Clock::now();
    std::string reply;
    Status status;
    {
      KeptThreadGil gil;
      status = RunInline(*fn, *err, call, in, reply);
      in.reset();  // the last reference may be Python's
    }
    if (call.one_way()) return;
    (void)(status.ok() ? call.Reply(std::string_view(reply)) : call.ReplyError(status));
  };
  return Check(WithoutGil([&] { return c.Serve(service, std::move(run)); }));
}

}  // namespace mcdma::python
