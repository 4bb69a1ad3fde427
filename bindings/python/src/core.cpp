// _Core: connecting, closing and the bytes that go in (see core.hpp).
#include "core.hpp"

#include <string>
#include <utility>

#include "errors.hpp"
#include "gil.hpp"

namespace py = pybind11;

namespace mcdma::python {

InputBytes::InputBytes(const py::handle& obj) {
  if (obj.is_none()) return;
  if (PyUnicode_Check(obj.ptr())) {
    Py_ssize_t n = 0;
    const char* s = PyUnicode_AsUTF8AndSize(obj.ptr(), &n);
    if (s == nullptr) throw py::error_already_set();
    utf8_.assign(s, static_cast<size_t>(n));
    span_ = std::as_bytes(std::span<const char>(utf8_));
    return;
  }
  if (PyObject_GetBuffer(obj.ptr(), &view_, PyBUF_C_CONTIGUOUS) != 0) {
    PyErr_Clear();
    throw py::type_error(
        "expected bytes-like data (bytes, bytearray, memoryview, a contiguous "
        "array) or str, got " +
        std::string(Py_TYPE(obj.ptr())->tp_name));
  }
  has_view_ = true;
  span_ = std::span<const std::byte>(static_cast<const std::byte*>(view_.buf),
                                     static_cast<size_t>(view_.len));
}

InputBytes::~InputBytes() {
  if (has_view_) PyBuffer_Release(&view_);
}

std::shared_ptr<Core> Core::Connect(const CoreOptions& options) {
  if (options.handler_threads < 1) {
    throw py::value_error(
        "handler_threads must be at least 1 (Python handlers never run on "
        "the library's progress thread)");
  }
  ClientOptions o;
  o.socket = options.socket;
  o.app_name = options.app_name;
  o.default_timeout = SecondsToMs(options.timeout, "timeout");
  o.connect_timeout = SecondsToMs(options.connect_timeout, "connect_timeout");
  if (o.connect_timeout.count() == 0) o.connect_timeout = ClientOptions().connect_timeout;
  o.handler_threads = options.handler_threads;
  auto client = Check(WithoutGil([&] { return Client::Connect(o); }));
  return std::shared_ptr<Core>(new Core(std::move(client), options.handler_threads));
}

Core::Core(std::unique_ptr<Client> client, int handler_threads)
    : client_(std::move(client)), info_(client_->info()), handler_threads_(handler_threads) {}

Core::~Core() { Close(); }

void Core::Close() {
  std::map<uint64_t, std::shared_ptr<NotifyQueue>> subs;
  {
    std::lock_guard lock(mu_);
    if (closed_) return;
    closed_ = true;
    subs.swap(subs_);
  }
  // First free the library's handler threads (they may be waiting for a
  // Python handler), then stop the library: Shutdown joins them.
  calls_->Close();
  WithoutGilIfHeld([&] {
    std::unique_lock lock(submit_mu_);
    client_->Close();
    completions_->Close();
  });
  for (auto& [id, q] : subs) q->Close("the client was closed");
}

bool Core::closed() const {
  std::lock_guard lock(mu_);
  return closed_;
}

Client& Core::Open() const {
  std::lock_guard lock(mu_);
  if (closed_) throw StatusError(Status(Code::kUnavailable, "the client is closed"));
  return *client_;
}

std::shared_ptr<IncomingCall> Core::NextCall() {
  return WithoutGil([&] { return calls_->Next(); });
}

void Core::Answer(IncomingCall& call, Status status, std::string reply) {
  calls_->Answer(call, std::move(status), std::move(reply));
}

std::optional<Completion> Core::NextCompletion() {
  return WithoutGil([&] { return completions_->Next(); });
}

}  // namespace mcdma::python
