// CUDA kernels of mcdma-cuda-check (see pattern_kernels.hpp). Grid-stride
// loops, so one launch covers any size.
#include "pattern_kernels.hpp"

namespace mcdma::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 1024;

__global__ void FillKernel(uint64_t* dst, uint64_t words, uint32_t layer) {
  const uint64_t stride = uint64_t{blockDim.x} * gridDim.x;
  for (uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < words; i += stride) {
    dst[i] = i * kGolden + layer;
  }
}

__global__ void CountKernel(const uint64_t* src, uint64_t words, uint32_t layer,
                            unsigned long long* mismatches) {
  const uint64_t stride = uint64_t{blockDim.x} * gridDim.x;
  unsigned long long mine = 0;
  for (uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < words; i += stride) {
    if (src[i] != i * kGolden + layer) ++mine;
  }
  if (mine != 0) atomicAdd(mismatches, mine);
}

int Blocks(uint64_t words) {
  uint64_t blocks = (words + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < kMaxBlocks ? (blocks == 0 ? 1 : blocks) : kMaxBlocks);
}

}  // namespace

cudaError_t FillPattern(void* dst, uint64_t words, uint32_t layer) {
  FillKernel<<<Blocks(words), kThreads>>>(static_cast<uint64_t*>(dst), words, layer);
  cudaError_t e = cudaGetLastError();
  return e != cudaSuccess ? e : cudaDeviceSynchronize();
}

cudaError_t CountMismatches(const void* src, uint64_t words, uint32_t layer, uint64_t* mismatches) {
  unsigned long long* counter = nullptr;
  cudaError_t e = cudaMalloc(&counter, sizeof(*counter));
  if (e != cudaSuccess) return e;
  e = cudaMemset(counter, 0, sizeof(*counter));
  if (e == cudaSuccess) {
    CountKernel<<<Blocks(words), kThreads>>>(static_cast<const uint64_t*>(src), words, layer,
                                             counter);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  unsigned long long host = 0;
  if (e == cudaSuccess) e = cudaMemcpy(&host, counter, sizeof(host), cudaMemcpyDeviceToHost);
  cudaError_t freed = cudaFree(counter);
  if (e == cudaSuccess) e = freed;
  *mismatches = host;
  return e;
}

}  // namespace mcdma::cuda
