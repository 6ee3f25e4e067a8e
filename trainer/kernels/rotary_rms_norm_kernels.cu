#include "trainer/kernels/rotary_rms_norm_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace xv::trainer::kernels {

namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kMaxPairsPerLane = 4;  // head_dim <= 2 * 32 * 4

template <typename T>
__device__ __forceinline__ float Load(const T* p);
template <>
__device__ __forceinline__ float Load<float>(const float* p) {
  return *p;
}
template <>
__device__ __forceinline__ float Load<__nv_bfloat16>(const __nv_bfloat16* p) {
  return __bfloat162float(*p);
}
template <>
__device__ __forceinline__ float Load<__half>(const __half* p) {
  return __half2float(*p);
}

template <typename T>
__device__ __forceinline__ void Store(T* p, float v);
template <>
__device__ __forceinline__ void Store<float>(float* p, float v) {
  *p = v;
}
template <>
__device__ __forceinline__ void Store<__nv_bfloat16>(__nv_bfloat16* p, float v) {
  *p = __float2bfloat16(v);
}
template <>
__device__ __forceinline__ void Store<__half>(__half* p, float v) {
  *p = __float2half(v);
}

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

template <typename T>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    ForwardKernel(const T* __restrict__ x, const float* __restrict__ cos,
                  const float* __restrict__ sin, int64_t rows, int64_t heads, int64_t seq_len,
                  int head_dim, float eps, T* __restrict__ z, float* __restrict__ rstd_out) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const int half = head_dim / 2;
  const int64_t t = (row / heads) % seq_len;
  const T* xr = x + row * head_dim;
  const float* c = cos + t * half;
  const float* s = sin + t * half;
  float y1[kMaxPairsPerLane], y2[kMaxPairsPerLane];
  float ss = 0.f;
#pragma unroll
  for (int k = 0; k < kMaxPairsPerLane; ++k) {
    const int j = lane + 32 * k;
    y1[k] = y2[k] = 0.f;
    if (j < half) {
      const float a = Load(xr + j), b = Load(xr + j + half);
      const float cj = c[j], sj = s[j];
      y1[k] = a * cj + b * sj;
      y2[k] = -a * sj + b * cj;
      ss += y1[k] * y1[k] + y2[k] * y2[k];
    }
  }
  ss = WarpSum(ss);
  const float r = rsqrtf(ss / static_cast<float>(head_dim) + eps);
  T* zr = z + row * head_dim;
#pragma unroll
  for (int k = 0; k < kMaxPairsPerLane; ++k) {
    const int j = lane + 32 * k;
    if (j < half) {
      Store(zr + j, y1[k] * r);
      Store(zr + j + half, y2[k] * r);
    }
  }
  if (lane == 0) rstd_out[row] = r;
}

template <typename T>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    BackwardKernel(const T* __restrict__ x, const T* __restrict__ dz, const float* __restrict__ cos,
                   const float* __restrict__ sin, const float* __restrict__ rstd, int64_t rows,
                   int64_t heads, int64_t seq_len, int head_dim, T* __restrict__ dx) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const int half = head_dim / 2;
  const int64_t t = (row / heads) % seq_len;
  const T* xr = x + row * head_dim;
  const T* dzr = dz + row * head_dim;
  const float* c = cos + t * half;
  const float* s = sin + t * half;
  const float r = rstd[row];
  float z1[kMaxPairsPerLane], z2[kMaxPairsPerLane], g1[kMaxPairsPerLane], g2[kMaxPairsPerLane];
  float dot = 0.f;
#pragma unroll
  for (int k = 0; k < kMaxPairsPerLane; ++k) {
    const int j = lane + 32 * k;
    z1[k] = z2[k] = g1[k] = g2[k] = 0.f;
    if (j < half) {
      const float a = Load(xr + j), b = Load(xr + j + half);
      const float cj = c[j], sj = s[j];
      z1[k] = (a * cj + b * sj) * r;
      z2[k] = (-a * sj + b * cj) * r;
      g1[k] = Load(dzr + j);
      g2[k] = Load(dzr + j + half);
      dot += g1[k] * z1[k] + g2[k] * z2[k];
    }
  }
  dot = WarpSum(dot) / static_cast<float>(head_dim);
  T* dxr = dx + row * head_dim;
#pragma unroll
  for (int k = 0; k < kMaxPairsPerLane; ++k) {
    const int j = lane + 32 * k;
    if (j < half) {
      const float dy1 = r * (g1[k] - z1[k] * dot), dy2 = r * (g2[k] - z2[k] * dot);
      const float cj = c[j], sj = s[j];
      Store(dxr + j, dy1 * cj - dy2 * sj);
      Store(dxr + j + half, dy1 * sj + dy2 * cj);
    }
  }
}

const char* LastError() {
  cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

unsigned Blocks(int64_t rows) {
  return static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

}  // namespace

const char* LaunchRotaryRmsNormForward(const void* x, RotaryType type, const float* cos,
                                       const float* sin, int64_t rows, int64_t heads,
                                       int64_t seq_len, int64_t head_dim, float eps, void* z,
                                       float* rstd, void* stream) {
  if (head_dim % 2 != 0 || head_dim > 2 * 32 * kMaxPairsPerLane) return "head_dim not supported";
  if (rows == 0) return nullptr;
  auto st = static_cast<cudaStream_t>(stream);
  const int d = static_cast<int>(head_dim);
  switch (type) {
    case RotaryType::kFloat32:
      ForwardKernel<float><<<Blocks(rows), kWarpsPerBlock * 32, 0, st>>>(
          static_cast<const float*>(x), cos, sin, rows, heads, seq_len, d, eps,
          static_cast<float*>(z), rstd);
      break;
    case RotaryType::kBFloat16:
      ForwardKernel<__nv_bfloat16><<<Blocks(rows), kWarpsPerBlock * 32, 0, st>>>(
          static_cast<const __nv_bfloat16*>(x), cos, sin, rows, heads, seq_len, d, eps,
          static_cast<__nv_bfloat16*>(z), rstd);
      break;
    case RotaryType::kFloat16:
      ForwardKernel<__half><<<Blocks(rows), kWarpsPerBlock * 32, 0, st>>>(
          static_cast<const __half*>(x), cos, sin, rows, heads, seq_len, d, eps,
          static_cast<__half*>(z), rstd);
      break;
  }
  return LastError();
}

const char* LaunchRotaryRmsNormBackward(const void* x, const void* dz, RotaryType type,
                                        const float* cos, const float* sin, const float* rstd,
                                        int64_t rows, int64_t heads, int64_t seq_len,
                                        int64_t head_dim, void* dx, void* stream) {
  if (head_dim % 2 != 0 || head_dim > 2 * 32 * kMaxPairsPerLane) return "head_dim not supported";
  if (rows == 0) return nullptr;
  auto st = static_cast<cudaStream_t>(stream);
  const int d = static_cast<int>(head_dim);
  switch (type) {
    case RotaryType::kFloat32:
      BackwardKernel<float><<<Blocks(rows), kWarpsPerBlock * 32, 0, st>>>(
          static_cast<const float*>(x), static_cast<const float*>(dz), cos, sin, rstd, rows, heads,
          seq_len, d, static_cast<float*>(dx));
      break;
    case RotaryType::kBFloat16:
      BackwardKernel<__nv_bfloat16><<<Blocks(rows), kWarpsPerBlock * 32, 0, st>>>(
          static_cast<const __nv_bfloat16*>(x), static_cast<const __nv_bfloat16*>(dz), cos, sin,
          rstd, rows, heads, seq_len, d, static_cast<__nv_bfloat16*>(dx));
      break;
    case RotaryType::kFloat16:
      BackwardKernel<__half><<<Blocks(rows), kWarpsPerBlock * 32, 0, st>>>(
          static_cast<const __half*>(x), static_cast<const __half*>(dz), cos, sin, rstd, rows,
          heads, seq_len, d, static_cast<__half*>(dx));
      break;
  }
  return LastError();
}

}  // namespace xv::trainer::kernels
