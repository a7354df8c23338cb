// CUDA's few kernel-side names for a host C++ compiler, so that gpu_ntt.cu's kernels run on the CPU with one thread
// per block (compiled with -DCROSSFHE_GPU_EMULATE -include gpu_emulate.h; tests only: crossfhe.kernels.gpu_native).
#pragma once
#include <cstdint>

#define __global__
#define __host__
#define __device__
#define __forceinline__ inline
#define __shared__
#define __launch_bounds__(n)

struct EmulatedDim3 {
  unsigned x = 0, y = 0, z = 0;
};

namespace {
EmulatedDim3 threadIdx, blockIdx, blockDim;
constexpr long kEmuWords = 1 << 18;
uint32_t tile[kEmuWords];  // the kernels' dynamic shared memory: a block's (NTT), or a cluster's blocks' side by side
inline uint32_t __umulhi(uint32_t a, uint32_t b) { return static_cast<uint32_t>((uint64_t{a} * b) >> 32); }
inline uint64_t __umul64hi(uint64_t a, uint64_t b) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(a) * b) >> 64);
}
inline uint32_t __ldg(const uint32_t* p) { return *p; }
inline void __syncthreads() {}
}  // namespace
