// mcdma._mcdma.checksum: XXH3-64 of a byte range of any contiguous buffer
// (an mcdma.Buffer, a numpy array, bytes), computed with the GIL released.
// It is libmcdma's kv::Checksum, the hand-off's own layer checksum (xxHash,
// with the widest vector unit the CPU has), so a layer checked here and one
// checked by kv::Import agree by construction.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <string>

#include "bindings.hpp"
#include "gil.hpp"
#include "mcdma/kv.hpp"

namespace py = pybind11;

namespace mcdma::python {

namespace {

uint64_t Checksum(const py::buffer& data, uint64_t offset, std::optional<uint64_t> length) {
  py::buffer_info info = data.request();
  const auto size = static_cast<uint64_t>(info.size) * static_cast<uint64_t>(info.itemsize);
  bool contiguous = true;
  auto expected = static_cast<py::ssize_t>(info.itemsize);
  for (auto i = info.ndim; i-- > 0;) {
    if (info.shape[i] > 1 && info.strides[i] != expected) contiguous = false;
    expected *= info.shape[i];
  }
  if (!contiguous) throw py::value_error("checksum: the buffer is not C-contiguous");
  if (offset > size) {
    throw py::value_error("checksum: offset " + std::to_string(offset) + " is past the end (" +
                          std::to_string(size) + " bytes)");
  }
  const uint64_t n = length.value_or(size - offset);
  if (n > size - offset) {
    throw py::value_error("checksum: " + std::to_string(n) + " bytes at offset " +
                          std::to_string(offset) + " run past the end (" + std::to_string(size) +
                          " bytes)");
  }
  const auto* bytes = static_cast<const std::byte*>(info.ptr) + offset;
  return WithoutGil([&] { return kv::Checksum({bytes, n}); });
}

}  // namespace

void BindChecksum(py::module_& m) {
  m.def("checksum", &Checksum, py::arg("data"), py::arg("offset") = 0,
        py::arg("length") = py::none(),
        R"doc(XXH3-64 of ``length`` bytes of ``data`` from ``offset`` (default: to the end).

``data`` is any C-contiguous buffer: an mcdma.Buffer, a numpy array, bytes.
The GIL is released while it runs. Raises ValueError for a range outside
the buffer or a non-contiguous one.)doc");
  m.attr("CHECKSUM_ALGORITHM") = "xxh3-64";
}

}  // namespace mcdma::python
