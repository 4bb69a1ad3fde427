// How the binding reports failure to Python: a libmcdma Status becomes an
// instance of the mcdma.Error subclass named after its Code.
//
// The classes are made in Python (mcdma/_errors.py) from the code list this
// module exports (Codes(): every mcdma::Code and its CodeName), so they
// cannot drift from status.hpp. mcdma/_errors.py hands its factory to the
// extension (_mcdma._set_error_factory); C++ code throws StatusError and the
// translator registered here asks the factory for the instance to raise.
#pragma once

#include <pybind11/pybind11.h>
// Every file converts STL types the same way (pybind11 casters must agree).
#include <pybind11/stl.h>

#include <chrono>
#include <exception>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mcdma/status.hpp"

namespace mcdma::python {

// Carries a Status out of binding code; translated into mcdma.Error.
class StatusError : public std::exception {
 public:
  explicit StatusError(Status status) : status_(std::move(status)), what_(status_.ToString()) {}
  const Status& status() const { return status_; }
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  Status status_;
  std::string what_;
};

// Throws StatusError unless `st` is OK.
inline void Check(const Status& st) {
  if (!st.ok()) throw StatusError(st);
}

template <typename T>
T Check(Result<T>&& r) {
  if (!r.ok()) throw StatusError(r.status());
  return std::move(r).value();
}

// Every Code with its stable name, in numeric order (kOk first).
std::vector<std::pair<std::string, int>> Codes();
// Every Reason with its stable name, in numeric order (kNone first).
std::vector<std::pair<std::string, int>> Reasons();

// Seconds from Python (None: the library's default or "none", per `what`)
// to milliseconds (None -> 0), rounded up. Raises ValueError naming `what`
// unless None or a finite number > 0.
std::chrono::milliseconds SecondsToMs(std::optional<double> seconds, const char* what = "timeout");

// The mcdma.Error instance for `st` (a RuntimeError before mcdma/_errors.py
// registered its factory). Needs the GIL.
pybind11::object MakeError(const Status& st);

// Registers the StatusError translator and _set_error_factory on `m`.
void BindErrors(pybind11::module_& m);

}  // namespace mcdma::python
