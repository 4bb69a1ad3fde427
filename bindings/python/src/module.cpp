// mcdma._mcdma: the pybind11 extension under the `mcdma` Python package.
// Layout: errors (Status -> mcdma.Error), buffer + dlpack (zero-copy
// Buffer), queues (library threads -> Python threads), core* (_Core: one
// session), bind_* (what Python sees). Threading and GIL rules: gil.hpp.
#include <pybind11/pybind11.h>

#include "bindings.hpp"
#include "buffer.hpp"
#include "errors.hpp"

PYBIND11_MODULE(_mcdma, m) {
  m.doc() = "libmcdma for Python (the C++ layer of the mcdma package; use mcdma.Client).";
  m.attr("__version__") = MCDMA_VERSION_TEXT;
  mcdma::python::BindErrors(m);
  mcdma::python::BindBuffer(m);
  mcdma::python::BindTypes(m);
  mcdma::python::BindCore(m);
  mcdma::python::BindChecksum(m);
  mcdma::python::BindKv(m);
}
