// mcdma::cuda::MappedBuffer over the CUDA runtime API (see mcdma/cuda.hpp).
#include <cuda_runtime_api.h>

#include <utility>

#include "mcdma/cuda.hpp"

namespace mcdma::cuda {
namespace {

std::string CudaText(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

// No driver, no device, or a driver older than this runtime: the machine
// cannot run CUDA at all, which callers (the check, the tests) report as a
// skip rather than a failure.
bool NoCuda(cudaError_t e) {
  return e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ||
         e == cudaErrorInitializationError || e == cudaErrorSystemDriverMismatch ||
         e == cudaErrorCompatNotSupportedOnDevice;
}

Status Failed(const char* what, cudaError_t e) {
  return Status(NoCuda(e) ? Code::kUnavailable : Code::kSystem,
                std::string(what) + ": " + CudaText(e));
}

}  // namespace

Result<int> DeviceCount() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return Failed("cudaGetDeviceCount", e);
  if (n == 0) return Status(Code::kUnavailable, "no CUDA device");
  return n;
}

Result<std::string> DeviceName(int device) {
  cudaDeviceProp p{};
  cudaError_t e = cudaGetDeviceProperties(&p, device);
  if (e != cudaSuccess) return Failed("cudaGetDeviceProperties", e);
  return std::string(p.name) + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) + ", " +
         std::to_string(p.totalGlobalMem >> 30) + " GiB, " +
         (p.integrated != 0 ? "integrated" : "discrete") + ")";
}

Result<MappedBuffer> MappedBuffer::Register(const Buffer& buffer, int device) {
  if (buffer.data() == nullptr || buffer.size() == 0) {
    return Status(Code::kInvalid, "MappedBuffer::Register: an empty buffer");
  }
  cudaError_t e = cudaSetDevice(device);
  if (e != cudaSuccess) return Failed("cudaSetDevice", e);
  // Portable: every device (and context) may use it; Mapped: it gets a
  // device address.
  e = cudaHostRegister(buffer.data(), buffer.size(),
                       cudaHostRegisterPortable | cudaHostRegisterMapped);
  if (e != cudaSuccess) return Failed("cudaHostRegister", e);
  void* device_ptr = nullptr;
  e = cudaHostGetDevicePointer(&device_ptr, buffer.data(), 0);
  if (e != cudaSuccess) {
    (void)cudaHostUnregister(buffer.data());
    return Failed("cudaHostGetDevicePointer", e);
  }
  return MappedBuffer(buffer, device_ptr, device);
}

MappedBuffer::MappedBuffer(MappedBuffer&& other) noexcept
    : buffer_(std::move(other.buffer_)),
      device_ptr_(std::exchange(other.device_ptr_, nullptr)),
      device_(other.device_) {}

MappedBuffer& MappedBuffer::operator=(MappedBuffer&& other) noexcept {
  if (this != &other) {
    Unregister();
    buffer_ = std::move(other.buffer_);
    device_ptr_ = std::exchange(other.device_ptr_, nullptr);
    device_ = other.device_;
  }
  return *this;
}

MappedBuffer::~MappedBuffer() { Unregister(); }

void MappedBuffer::Unregister() {
  if (device_ptr_ == nullptr) return;
  (void)cudaHostUnregister(buffer_.data());
  device_ptr_ = nullptr;
}

}  // namespace mcdma::cuda
