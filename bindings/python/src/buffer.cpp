// mcdma.Buffer: buffer protocol, __array_interface__ and DLPack.
#include "buffer.hpp"

#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <utility>

#include "gil.hpp"

namespace py = pybind11;

namespace mcdma::python {
namespace {

constexpr int32_t kDlCpu = 1;  // DLDeviceType kDLCPU

// The DLPack entry point (Python array API standard): CPU only, never a
// copy, any stream argument refused except None.
py::capsule Dlpack(const PyBuffer& self, const py::object& stream,
                   const std::optional<std::pair<int, int>>& max_version,
                   const std::optional<std::pair<int, int>>& dl_device,
                   const std::optional<bool>& copy) {
  if (!stream.is_none()) {
    throw py::buffer_error("mcdma.Buffer is CPU memory: __dlpack__ takes no stream");
  }
  if (dl_device && (dl_device->first != kDlCpu || dl_device->second != 0)) {
    throw py::buffer_error("mcdma.Buffer is CPU memory: it cannot be exported to device (" +
                           std::to_string(dl_device->first) + ", " +
                           std::to_string(dl_device->second) + ")");
  }
  if (copy && *copy) {
    throw py::buffer_error("mcdma.Buffer exports its memory only without a copy (copy=True)");
  }
  bool versioned = max_version && max_version->first >= 1;
  return MakeDlpackCapsule(self.get(), versioned);
}

py::dict ArrayInterface(const PyBuffer& self) {
  py::dict d;
  d["version"] = 3;
  d["shape"] = py::make_tuple(self.size());
  d["typestr"] = "|u1";
  d["data"] = py::make_tuple(reinterpret_cast<uintptr_t>(self.data()), false);
  d["strides"] = py::none();
  return d;
}

}  // namespace

void DropBuffer(Buffer& buffer) {
  WithoutGilIfHeld([&] { buffer = Buffer(); });
}

PyBuffer::~PyBuffer() { DropBuffer(buffer_); }

void BindBuffer(py::module_& m) {
  py::class_<PyBuffer>(m, "Buffer", py::buffer_protocol(), R"doc(
A page-aligned shared-memory buffer allocated by the daemon (Client.alloc).

Exposes its bytes without copies: the buffer protocol (writable, 1-D,
format 'B'), __array_interface__ and DLPack (kDLCPU, uint8). So
numpy.frombuffer(buf, dtype), numpy.asarray(buf), torch.frombuffer(buf,
dtype=...) and torch.from_dlpack(buf) all see the same memory the daemon
reads and writes in transfers. The memory stays valid while this object or
any view of it exists, even after the Client is closed.
)doc")
      .def_buffer([](PyBuffer& self) {
        return py::buffer_info(self.data(), 1, py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(self.size())}, {py::ssize_t{1}},
                               /*readonly=*/false);
      })
      .def_property_readonly("size", &PyBuffer::size, "Size in bytes.")
      .def_property_readonly(
          "id", [](const PyBuffer& self) { return self.get().id(); },
          "The daemon's id of this buffer (for logs and mcdmactl).")
      .def_property_readonly(
          "address", [](const PyBuffer& self) { return reinterpret_cast<uintptr_t>(self.data()); },
          "The address of the first byte in this process (page-aligned).")
      .def("__len__", &PyBuffer::size, "Size in bytes.")
      .def_property_readonly("__array_interface__", &ArrayInterface,
                             "numpy array interface (v3): 1-D uint8, writable, no copy.")
      .def("__dlpack__", &Dlpack, py::kw_only(), py::arg("stream") = py::none(),
           py::arg("max_version") = py::none(), py::arg("dl_device") = py::none(),
           py::arg("copy") = py::none(),
           "A DLPack capsule of a 1-D uint8 CPU tensor over this buffer (no copy). The capsule "
           "keeps the memory alive until its consumer lets go.")
      .def(
          "__dlpack_device__", [](const PyBuffer&) { return py::make_tuple(kDlCpu, 0); },
          "(kDLCPU, 0): the memory is host memory.")
      .def("__repr__", [](const PyBuffer& self) {
        return "<mcdma.Buffer id=" + std::to_string(self.get().id()) +
               " size=" + std::to_string(self.size()) + ">";
      });
}

}  // namespace mcdma::python
