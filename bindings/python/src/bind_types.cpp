// SessionInfo, RemoteBuffer, CallInfo and _NotifyQueue for Python.
#include <pybind11/stl.h>

#include <string>

#include "bindings.hpp"
#include "core.hpp"
#include "errors.hpp"
#include "gil.hpp"

namespace py = pybind11;

namespace mcdma::python {
namespace {

std::string Quoted(const std::string& s) { return py::repr(py::str(s)).cast<std::string>(); }

double Seconds(std::chrono::microseconds us) { return static_cast<double>(us.count()) / 1e6; }

}  // namespace

void BindTypes(py::module_& m) {
  py::class_<SessionInfo>(m, "SessionInfo", "What the daemon said when the session opened.")
      .def_readonly("session_id", &SessionInfo::session_id, "This session's id on its daemon.")
      .def_readonly("host_id", &SessionInfo::host_id, "The daemon's host id (peers name it so).")
      .def_readonly("daemon_version", &SessionInfo::daemon_version, "mcdma-rpcd's version.")
      .def_readonly("socket", &SessionInfo::socket, "The control socket connected to.")
      .def("__repr__", [](const SessionInfo& s) {
        return "SessionInfo(session_id=" + std::to_string(s.session_id) +
               ", host_id=" + Quoted(s.host_id) + ", daemon_version=" + Quoted(s.daemon_version) +
               ", socket=" + Quoted(s.socket) + ")";
      });

  py::class_<RemoteBuffer>(m, "RemoteBuffer", R"doc(
A handle to another app's export (Client.resolve), checked by the daemon on
every use. Pass it to Client.read / write / read_batch / write_batch; hand it
back with Client.release. Apps never see keys or addresses.
)doc")
      .def_readonly("handle", &RemoteBuffer::handle, "The daemon's handle number.")
      .def_readonly("length", &RemoteBuffer::length, "Bytes exported.")
      .def_readonly("readable", &RemoteBuffer::readable, "Whether read() is allowed.")
      .def_readonly("writable", &RemoteBuffer::writable, "Whether write() is allowed.")
      .def_property_readonly(
          "peer",
          [](const RemoteBuffer& r) -> py::object {
            return r.peer.empty() ? py::none() : py::object(py::str(r.peer));
          },
          "The exporting host's id, or None for this host.")
      .def_readonly("name", &RemoteBuffer::name, "The export's name.")
      .def("__repr__", [](const RemoteBuffer& r) {
        return "RemoteBuffer(name=" + Quoted(r.name) +
               ", peer=" + (r.peer.empty() ? std::string("None") : Quoted(r.peer)) +
               ", length=" + std::to_string(r.length) +
               ", readable=" + (r.readable ? "True" : "False") +
               ", writable=" + (r.writable ? "True" : "False") +
               ", handle=" + std::to_string(r.handle) + ")";
      });

  py::class_<IncomingCall, std::shared_ptr<IncomingCall>>(m, "CallInfo", R"doc(
What a handler (Client.serve) learns about the call it is serving, besides
the request bytes.
)doc")
      .def_readonly("service", &IncomingCall::service, "The service name served.")
      .def_readonly("service_id", &IncomingCall::service_id, "The daemon's id of the service.")
      .def_readonly("one_way", &IncomingCall::one_way,
                    "True for a notification (Client.notify): the return value is dropped.")
      .def_property_readonly(
          "time_left",
          [](const IncomingCall& c) {
            auto left = std::chrono::duration_cast<std::chrono::microseconds>(
                c.arrived + c.time_left - Clock::now());
            return c.time_left.count() <= 0 ? 0.0 : std::max(0.0, Seconds(left));
          },
          "Seconds left before the caller's deadline, now (a reply after it is dropped). For a "
          "notification: the sender's delivery deadline.")
      .def_readonly("_token", &IncomingCall::token)
      .def_property_readonly(
          "_request", [](const IncomingCall& c) { return py::bytes(c.payload); },
          "The request bytes (a copy).")
      .def("__repr__", [](const IncomingCall& c) {
        return "CallInfo(service=" + Quoted(c.service) +
               ", service_id=" + std::to_string(c.service_id) +
               ", one_way=" + (c.one_way ? "True" : "False") + ")";
      });

  py::class_<NotifyQueue, std::shared_ptr<NotifyQueue>>(
      m, "_NotifyQueue", "The queue behind an mcdma.Subscription (filled by a library thread).")
      .def(
          "pop",
          [](NotifyQueue& q, std::optional<double> timeout) {
            std::optional<std::chrono::milliseconds> ms;
            if (timeout) {
              ms = *timeout <= 0 ? std::chrono::milliseconds(0) : SecondsToMs(timeout);
            }
            std::string payload = Check(WithoutGil([&] { return q.Pop(ms); }));
            return py::bytes(payload);
          },
          py::arg("timeout") = py::none(),
          "The oldest notification; raises Timeout after `timeout` seconds (None: no limit, "
          "<= 0: do not wait) or Cancelled once closed and drained.")
      .def_property_readonly("pending", &NotifyQueue::pending, "Notifications waiting.")
      .def_property_readonly("dropped", &NotifyQueue::dropped,
                             "Notifications dropped because max_pending were waiting.")
      .def_property_readonly("closed", &NotifyQueue::closed, "Whether the queue is closed.");
}

}  // namespace mcdma::python
