// mcdma.Buffer: a daemon-allocated, page-aligned shared-memory buffer as a
// Python object that numpy and torch wrap without copying.
//
// Lifetime: the memory is the mapping held by the mcdma::Buffer inside. It
// stays valid while the Python Buffer lives, and every view keeps that
// alive: a memoryview (buffer protocol) and a numpy array (buffer protocol
// or __array_interface__) hold a reference to the Python object; a DLPack
// capsule (torch.from_dlpack) holds a copy of the mcdma::Buffer itself, so
// it needs neither the Python object nor the GIL to let go. The mapping
// outlives the Client (closing the session only stops the daemon-side use).
//
// Threads: any; a Buffer is immutable (its bytes are the app's business).
#pragma once

#include <pybind11/pybind11.h>

#include "mcdma/client.hpp"

namespace mcdma::python {

class PyBuffer {
 public:
  explicit PyBuffer(Buffer buffer) : buffer_(std::move(buffer)) {}
  PyBuffer(const PyBuffer&) = delete;
  PyBuffer& operator=(const PyBuffer&) = delete;
  // Dropping the last reference tells the daemon (a gRPC request): done
  // without the GIL.
  ~PyBuffer();

  const Buffer& get() const { return buffer_; }
  std::byte* data() const { return buffer_.data(); }
  uint64_t size() const { return buffer_.size(); }

 private:
  Buffer buffer_;
};

// Drops `buffer` (possibly the last reference: a gRPC Free) without the GIL
// where this thread holds it.
void DropBuffer(Buffer& buffer);

// Registers mcdma._mcdma.Buffer.
void BindBuffer(pybind11::module_& m);

// DLPack (dlpack.cpp): a "dltensor" (or, for max_version >= 1,
// "dltensor_versioned") capsule of a 1-D uint8 CPU tensor over `buffer`.
pybind11::capsule MakeDlpackCapsule(const Buffer& buffer, bool versioned);

}  // namespace mcdma::python
