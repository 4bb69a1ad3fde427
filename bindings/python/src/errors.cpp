// Status -> mcdma.Error, and the code list the Python classes are made from.
#include "errors.hpp"

#include <cmath>

namespace py = pybind11;

namespace mcdma::python {
namespace {

// The factory mcdma/_errors.py registered: (code: int, message: str,
// reason: int) -> Error. A module attribute, not a C++ global, so the interpreter owns it and
// tears it down with the module.
constexpr const char* kFactoryAttr = "_error_factory";
// The extension module, kept for the translator (borrowed: modules live
// until the interpreter ends).
PyObject* g_module = nullptr;

}  // namespace

std::vector<std::pair<std::string, int>> Codes() {
  std::vector<std::pair<std::string, int>> codes;
  for (int v = 0; v <= static_cast<int>(kMaxCode); ++v) {
    codes.emplace_back(CodeName(static_cast<Code>(v)), v);
  }
  return codes;
}

std::vector<std::pair<std::string, int>> Reasons() {
  std::vector<std::pair<std::string, int>> reasons;
  for (int v = 0; v <= static_cast<int>(kMaxReason); ++v) {
    reasons.emplace_back(ReasonName(static_cast<Reason>(v)), v);
  }
  return reasons;
}

std::chrono::milliseconds SecondsToMs(std::optional<double> seconds, const char* what) {
  if (!seconds) return std::chrono::milliseconds(0);
  if (!(*seconds > 0) || !std::isfinite(*seconds)) {
    throw py::value_error(std::string(what) +
                          " must be a positive number of seconds or None, got " +
                          std::to_string(*seconds));
  }
  // Round up: a positive timeout never becomes 0 (which means "the default").
  double ms = std::ceil(*seconds * 1000.0);
  if (ms > static_cast<double>(UINT32_MAX)) ms = static_cast<double>(UINT32_MAX);
  return std::chrono::milliseconds(static_cast<int64_t>(ms));
}

py::object MakeError(const Status& st) {
  py::handle module(g_module);
  if (module && py::hasattr(module, kFactoryAttr)) {
    return module.attr(kFactoryAttr)(static_cast<int>(st.code()), st.message(),
                                     static_cast<int>(st.reason()));
  }
  return py::reinterpret_steal<py::object>(
      PyObject_CallFunction(PyExc_RuntimeError, "s", st.ToString().c_str()));
}

void BindErrors(py::module_& m) {
  g_module = m.ptr();
  m.def("codes", &Codes,
        "Every mcdma status code as (NAME, value) pairs, in numeric order (OK first). "
        "mcdma.Code and the mcdma.Error subclasses are generated from this list.");
  m.def("reasons", &Reasons,
        "Every mcdma reason as (NAME, value) pairs, in numeric order (NONE first): what "
        "mcdma.Error.reason holds.");
  m.def(
      "_set_error_factory",
      [](py::object factory) { py::handle(g_module).attr(kFactoryAttr) = std::move(factory); },
      "Registers the callable (code, message, reason) -> mcdma.Error used to raise errors.");
  // By value: pybind11 takes a plain function pointer of this signature.
  // NOLINTNEXTLINE(performance-unnecessary-value-param)
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      // A factory that raises throws error_already_set here, which the next
      // translator (pybind11's own) raises instead.
      py::object err = MakeError(e.status());
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(err.ptr())), err.ptr());
    }
  });
}

}  // namespace mcdma::python
