// The test pattern of mcdma-cuda-check, written and checked by CUDA kernels
// on mapped host memory: layer L is 64-bit words, word i = i * kGolden + L
// (the pattern of mcdma-kv-handoff and tests/python/test_kv_cross.py).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace mcdma::cuda {

// mcdma::demo::kGolden (demo/kv/pattern_handoff.hpp), which nvcc does not see.
inline constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

// Writes `words` words of layer `layer` at device address `dst`, and waits.
cudaError_t FillPattern(void* dst, uint64_t words, uint32_t layer);
// Counts the words at device address `src` that differ from the pattern
// into *mismatches, and waits.
cudaError_t CountMismatches(const void* src, uint64_t words, uint32_t layer, uint64_t* mismatches);

}  // namespace mcdma::cuda
