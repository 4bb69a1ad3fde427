// mcdma/cuda.hpp: mcdma buffers a CUDA GPU can use in place (libmcdma_cuda).
//
// An mcdma buffer is page-aligned host memory, shared with the daemon. CUDA
// can register such memory as pinned and mapped (cudaHostRegister with
// cudaHostRegisterMapped): kernels then read and write it directly through a
// device pointer (cudaHostGetDevicePointer), over PCIe or NVLink-C2C, with no
// copy and no staging buffer, and the daemon moves the same bytes to another
// host. On unified-memory machines (a DGX Spark's GB10) the GPU reaches it at
// memory speed.
//
//   auto client = mcdma::Client::Connect({});
//   auto buf = (*client)->Alloc(64 << 20);
//   auto mapped = mcdma::cuda::MappedBuffer::Register(*buf);   // device 0
//   my_kernel<<<grid, block>>>(static_cast<float*>(mapped->device_ptr()), ...);
//   cudaDeviceSynchronize();             // the bytes are in the buffer now
//   // ... export it, publish it, or hand it to torch (mcdma.cuda) ...
//
// The registration lasts as long as the MappedBuffer; it holds a reference
// to the buffer, so the memory stays mapped until both are gone. Errors:
// kUnavailable with the CUDA runtime's words when there is no driver or no
// device; kInvalid for an empty buffer; kSystem for a failed registration.
// Thread-safety: a MappedBuffer is immutable once made; the CUDA calls are
// the runtime's own (thread-safe).
#pragma once

#include <cstddef>
#include <string>

#include "mcdma/client.hpp"

namespace mcdma::cuda {

// The number of CUDA devices, or kUnavailable saying why there are none
// (no driver, no device, a driver too old for this runtime).
Result<int> DeviceCount();
// "NVIDIA GB10 (sm_121, 119 GiB)" for device `device`.
Result<std::string> DeviceName(int device);

class MappedBuffer {
 public:
  // Registers `buffer` (all of it) as mapped, pinned memory on `device`.
  static Result<MappedBuffer> Register(const Buffer& buffer, int device = 0);

  MappedBuffer(MappedBuffer&& other) noexcept;
  MappedBuffer& operator=(MappedBuffer&& other) noexcept;
  MappedBuffer(const MappedBuffer&) = delete;
  MappedBuffer& operator=(const MappedBuffer&) = delete;
  ~MappedBuffer();  // unregisters

  void* device_ptr() const { return device_ptr_; }
  std::byte* host_ptr() const { return buffer_.data(); }
  uint64_t size() const { return buffer_.size(); }
  int device() const { return device_; }

 private:
  MappedBuffer(Buffer buffer, void* device_ptr, int device)
      : buffer_(std::move(buffer)), device_ptr_(device_ptr), device_(device) {}
  void Unregister();

  Buffer buffer_;
  void* device_ptr_ = nullptr;
  int device_ = 0;
};

}  // namespace mcdma::cuda
