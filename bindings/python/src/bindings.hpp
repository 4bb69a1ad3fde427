// Registration of the _mcdma module's classes, one function per concern.
#pragma once

#include <pybind11/pybind11.h>

namespace mcdma::python {

// bind_types.cpp: SessionInfo, RemoteBuffer, CallInfo, _NotifyQueue.
void BindTypes(pybind11::module_& m);
// bind_core.cpp: _Core.
void BindCore(pybind11::module_& m);
// checksum.cpp: checksum() (XXH3-64), CHECKSUM_ALGORITHM.
void BindChecksum(pybind11::module_& m);
// kv.cpp: _KvExport, _KvImport, _KvPool (the KV hand-off of mcdma/kv.hpp).
void BindKv(pybind11::module_& m);

}  // namespace mcdma::python
