// The spellings that differ between CUDA and HIP, in one place, so the trainer's kernels
// (trainer/kernels/*.cu) are one source for both vendors: the runtime header, the stream and error
// types, bf16/fp16 element types and their conversions, and the warp shuffle.
//
// Warps: the kernels are written for 32-lane warps (rows of threadIdx.x / 32, shuffles over 32
// lanes). On AMD GPUs with 64-lane wavefronts (CDNA) the shuffles below run over width 32, i.e. on
// each half-wavefront separately, which is what the kernels' indexing assumes; no kernel relies on
// a barrier-free exchange across more than 32 lanes.
//
// HIP: compiled with hipcc (ROCm 5.2 and later; bf16 is hip_bfloat16 there, whose float
// constructor rounds to nearest even like __float2bfloat16). CI compiles the kernels with Debian's
// hipcc for AMD targets (compile only); the trainer uses them on ROCm once a HIP build of them is
// wired into trainer/CMakeLists.txt (today ROCm builds take the composite ATen fallbacks).
// Thread-safety: declarations only.
#pragma once

#if defined(__HIPCC__) || defined(__HIP_PLATFORM_AMD__)
#include <hip/hip_bfloat16.h>
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
#define XV_GPU_HIP 1
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#endif

namespace xv::trainer::kernels::gpu {

#if defined(XV_GPU_HIP)
using Stream = hipStream_t;
using BFloat16 = hip_bfloat16;
using Half = __half;

__device__ __forceinline__ float BFloat16ToFloat(BFloat16 v) { return static_cast<float>(v); }
__device__ __forceinline__ BFloat16 FloatToBFloat16(float v) { return BFloat16(v); }

// v from the lane `offset` away (lane ^ offset), within groups of 32 lanes.
__device__ __forceinline__ float ShuffleXor(float v, int offset) {
  return __shfl_xor(v, offset, 32);
}

// nullptr, or the text of the last launch error.
inline const char* LastErrorText() {
  hipError_t err = hipGetLastError();
  return err == hipSuccess ? nullptr : hipGetErrorString(err);
}
#else
using Stream = cudaStream_t;
using BFloat16 = __nv_bfloat16;
using Half = __half;

__device__ __forceinline__ float BFloat16ToFloat(BFloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ BFloat16 FloatToBFloat16(float v) { return __float2bfloat16(v); }

// v from the lane `offset` away (lane ^ offset), within groups of 32 lanes.
__device__ __forceinline__ float ShuffleXor(float v, int offset) {
  return __shfl_xor_sync(0xffffffffu, v, offset);
}

// nullptr, or the text of the last launch error.
inline const char* LastErrorText() {
  cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}
#endif

__device__ __forceinline__ float HalfToFloat(Half v) { return __half2float(v); }
__device__ __forceinline__ Half FloatToHalf(float v) { return __float2half(v); }

}  // namespace xv::trainer::kernels::gpu
