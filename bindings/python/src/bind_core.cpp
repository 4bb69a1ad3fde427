// _Core for Python. mcdma.Client (mcdma/_client.py) is the documented API;
// these are its building blocks, one per libmcdma operation.
#include <pybind11/stl.h>

#include <cstring>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "core.hpp"
#include "errors.hpp"

namespace py = pybind11;
using py::arg;

namespace mcdma::python {
namespace {

using Timeout = std::optional<double>;

ExportOptions MakeExportOptions(uint64_t offset, uint64_t length, Timeout ttl, bool allow_read,
                                bool allow_write, std::vector<std::string> allowed_peers) {
  ExportOptions o;
  o.offset = offset;
  o.length = length;
  o.ttl = SecondsToMs(ttl, "ttl");
  o.allow_read = allow_read;
  o.allow_write = allow_write;
  o.allowed_peers = std::move(allowed_peers);
  return o;
}

// (token, code, message, value): value is the reply bytes of a call or the
// byte count of a transfer (None on error).
py::object CompletionTuple(Completion c) {
  py::object value = py::none();
  if (c.status.ok()) {
    value = c.has_payload ? py::object(py::bytes(c.payload)) : py::object(py::int_(c.bytes));
  }
  DropBuffer(c.keep_alive);
  return py::make_tuple(c.token, static_cast<int>(c.status.code()), c.status.message(), value);
}

}  // namespace

void BindCore(py::module_& m) {
  py::class_<Core, std::shared_ptr<Core>> core(m, "_Core", R"doc(
One libmcdma session (the engine of mcdma.Client). Every method releases
the GIL while it waits. Raises mcdma.Error subclasses.
)doc");
  core.def_static(
      "connect",
      [](const std::string& socket, const std::string& app_name, Timeout timeout,
         Timeout connect_timeout, int handler_threads) {
        return Core::Connect(
            CoreOptions{socket, app_name, timeout, connect_timeout, handler_threads});
      },
      arg("socket") = "", arg("app_name") = "", arg("timeout") = py::none(),
      arg("connect_timeout") = py::none(), arg("handler_threads") = 1,
      "Opens a session with the daemon at `socket` ('' for the default).");
  core.def("close", &Core::Close, "Ends the session (idempotent).")
      .def_property_readonly("closed", &Core::closed, "Whether close() was called.")
      .def_property_readonly("info", &Core::info, "The SessionInfo.")
      .def_property_readonly("handler_threads", &Core::handler_threads,
                             "How many library threads hand calls to Python handlers.");

  core.def("call", &Core::Call, arg("service"), arg("data"), arg("timeout") = py::none(),
           "Calls `service` and returns the reply bytes.")
      .def("call_async", &Core::CallAsync, arg("service"), arg("data"), arg("timeout"),
           arg("token"), "Starts a call; its result is queued for next_completion() as `token`.")
      .def("notify", &Core::Notify, arg("service"), arg("data"), arg("timeout") = py::none(),
           "Sends a one-way message to `service`.")
      .def("serve", &Core::Serve, arg("service"), arg("token"),
           "Serves `service`; its calls are queued for next_call() with `token`. Returns the "
           "service id.")
      .def("serve_inline", &Core::ServeInline, arg("service"), arg("handler"), arg("on_error"),
           "Serves `service`; the library thread that took a call takes the GIL and calls "
           "handler(request, call); when it raises, on_error(call, exception) -> (code, "
           "message) gives the answer. Returns the service id.")
      .def(
          "subscribe",
          [](Core& self, const std::string& service, size_t max_pending) {
            uint64_t id = 0;
            auto queue = self.Subscribe(service, max_pending, &id);
            return py::make_tuple(id, queue);
          },
          arg("service"), arg("max_pending") = 0,
          "Serves `service` by queueing its notifications: returns (service_id, _NotifyQueue).")
      .def("unserve", &Core::Unserve, arg("service_id"), "Stops serving a service id.")
      .def(
          "next_call",
          [](Core& self) -> py::object {
            auto call = self.NextCall();
            return call ? py::cast(call) : py::none();
          },
          "Blocks for the next call for a Python handler (a CallInfo); None once closed.")
      .def(
          "answer",
          [](Core& self, IncomingCall& call, const py::handle& data) {
            InputBytes in(data);
            auto bytes = in.span();
            self.Answer(call, Status::Ok(),
                        std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
          },
          arg("call"), arg("data"), "Replies to `call` with `data` (ignored for notifications).")
      .def(
          "fail",
          [](Core& self, IncomingCall& call, int code, const std::string& message) {
            // A code this build does not know (or OK) is a bug in the caller.
            Code c = code > 0 ? CodeFromWire(static_cast<uint64_t>(code)) : Code::kInternal;
            self.Answer(call, Status(c, message), "");
          },
          arg("call"), arg("code"), arg("message"), "Answers `call` with an error.")
      .def(
          "next_completion",
          [](Core& self) -> py::object {
            auto c = self.NextCompletion();
            return c ? CompletionTuple(std::move(*c)) : py::none();
          },
          "Blocks for the next async result (token, code, message, value); None once closed "
          "and every started operation has been delivered.");

  core.def("alloc", &Core::Alloc, arg("size"), "Allocates a shared-memory Buffer.")
      .def(
          "export",
          [](Core& self, const PyBuffer& buffer, const std::string& name, uint64_t offset,
             uint64_t length, Timeout ttl, bool allow_read, bool allow_write,
             std::vector<std::string> allowed_peers) {
            self.Export(buffer, name,
                        MakeExportOptions(offset, length, ttl, allow_read, allow_write,
                                          std::move(allowed_peers)));
          },
          arg("buffer"), arg("name"), arg("offset") = 0, arg("length") = 0, arg("ttl") = py::none(),
          arg("allow_read") = true, arg("allow_write") = false,
          arg("allowed_peers") = std::vector<std::string>{}, "Exports a range of `buffer`.")
      .def("unexport", &Core::Unexport, arg("name"), "Withdraws an export.")
      .def("resolve", &Core::Resolve, arg("name"), arg("peer") = "",
           "Resolves an export ('' peer: this host) into a RemoteBuffer.")
      .def("release", &Core::Release, arg("remote"), "Hands a RemoteBuffer back.")
      .def("transfer", &Core::ReadWrite, arg("write"), arg("remote"), arg("remote_offset"),
           arg("buffer"), arg("local_offset"), arg("length"), arg("timeout") = py::none(),
           "One-sided read (write=False) or write; returns the bytes moved.")
      .def("transfer_async", &Core::ReadWriteAsync, arg("write"), arg("remote"),
           arg("remote_offset"), arg("buffer"), arg("local_offset"), arg("length"), arg("timeout"),
           arg("token"),
           "Starts a read or write; its result is queued for next_completion() as `token`.")
      .def("transfer_batch", &Core::ReadWriteBatch, arg("write"), arg("pieces"),
           arg("timeout") = py::none(),
           "Reads or writes every (buffer, local_offset, remote, remote_offset, length) "
           "together; returns the total bytes.");
}

}  // namespace mcdma::python
