#include "trainer/kernels/rotary_rms_norm_kernels.h"

#include "trainer/kernels/gpu_portability.h"

#include <cstdint>

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
__device__ __forceinline__ float Load<gpu::BFloat16>(const gpu::BFloat16* p) {
  return gpu::BFloat16ToFloat(*p);
}
template <>
__device__ __forceinline__ float Load<gpu::Half>(const gpu::Half* p) {
  return gpu::HalfToFloat(*p);
}

template <typename T>
__device__ __forceinline__ void Store(T* p, float v);
template <>
__device__ __forceinline__ void Store<float>(float* p, float v) {
  *p = v;
}
template <>
__device__ __forceinline__ void Store<gpu::BFloat16>(gpu::BFloat16* p, float v) {
  *p = gpu::FloatToBFloat16(v);
}
template <>
__device__ __forceinline__ void Store<gpu::Half>(gpu::Half* p, float v) {
  *p = gpu::FloatToHalf(v);
}

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += gpu::ShuffleXor(v, offset);
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

// The 16-byte vector kernels: kLanes lanes per row, each lane holding kVec = 16 / sizeof(T)
// consecutive elements of the first half and the matching ones of the second half, so every load
// and store of x, dz, z and dx is 16 bytes wide (the one-warp-per-row kernels above move 2 bytes
// per lane in bf16). A warp handles 32 / kLanes rows; the sums run over each row's lanes. The
// arithmetic per element is the same as above; only the order of the sum of squares (and of the
// backward's dot product) differs.
template <typename T>
struct Vec {
  static constexpr int kSize = 16 / static_cast<int>(sizeof(T));
};

template <typename T>
__device__ __forceinline__ void LoadVec(const T* p, float* out) {
  alignas(16) T v[Vec<T>::kSize];
  *reinterpret_cast<uint4*>(v) = *reinterpret_cast<const uint4*>(p);
#pragma unroll
  for (int i = 0; i < Vec<T>::kSize; ++i) out[i] = Load(&v[i]);
}

template <typename T>
__device__ __forceinline__ void StoreVec(T* p, const float* in) {
  alignas(16) T v[Vec<T>::kSize];
#pragma unroll
  for (int i = 0; i < Vec<T>::kSize; ++i) Store(&v[i], in[i]);
  *reinterpret_cast<uint4*>(p) = *reinterpret_cast<const uint4*>(v);
}

// kVec floats of a 16-byte aligned fp32 table.
template <int kVec>
__device__ __forceinline__ void LoadTable(const float* p, float* out) {
#pragma unroll
  for (int i = 0; i < kVec; i += 4) {
    const float4 f = *reinterpret_cast<const float4*>(p + i);
    out[i] = f.x;
    out[i + 1] = f.y;
    out[i + 2] = f.z;
    out[i + 3] = f.w;
  }
}

template <int kLanes>
__device__ __forceinline__ float RowSum(float v) {
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset >>= 1) {
    v += gpu::ShuffleXor(v, offset);
  }
  return v;
}

template <typename T, int kLanes>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    VectorForwardKernel(const T* __restrict__ x, const float* __restrict__ cos,
                        const float* __restrict__ sin, int64_t rows, int64_t heads, int64_t seq_len,
                        int head_dim, float eps, T* __restrict__ z, float* __restrict__ rstd_out) {
  constexpr int kVec = Vec<T>::kSize;
  const int lane = threadIdx.x % 32;
  const int64_t row =
      (static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32) * (32 / kLanes) +
      lane / kLanes;
  // Lanes past the last row still join the shuffles, with zeros.
  const bool active = row < rows;
  const int half = head_dim / 2;
  const int j = (lane % kLanes) * kVec;
  float a[kVec], b[kVec], c[kVec], s[kVec], y1[kVec], y2[kVec];
  float ss = 0.f;
  if (active) {
    const int64_t t = (row / heads) % seq_len;
    LoadVec(x + row * head_dim + j, a);
    LoadVec(x + row * head_dim + j + half, b);
    LoadTable<kVec>(cos + t * half + j, c);
    LoadTable<kVec>(sin + t * half + j, s);
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      y1[i] = a[i] * c[i] + b[i] * s[i];
      y2[i] = -a[i] * s[i] + b[i] * c[i];
      ss += y1[i] * y1[i] + y2[i] * y2[i];
    }
  }
  ss = RowSum<kLanes>(ss);
  if (!active) return;
  const float r = rsqrtf(ss / static_cast<float>(head_dim) + eps);
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    y1[i] *= r;
    y2[i] *= r;
  }
  StoreVec(z + row * head_dim + j, y1);
  StoreVec(z + row * head_dim + j + half, y2);
  if (lane % kLanes == 0) rstd_out[row] = r;
}

template <typename T, int kLanes>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    VectorBackwardKernel(const T* __restrict__ x, const T* __restrict__ dz,
                         const float* __restrict__ cos, const float* __restrict__ sin,
                         const float* __restrict__ rstd, int64_t rows, int64_t heads,
                         int64_t seq_len, int head_dim, T* __restrict__ dx) {
  constexpr int kVec = Vec<T>::kSize;
  const int lane = threadIdx.x % 32;
  const int64_t row =
      (static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32) * (32 / kLanes) +
      lane / kLanes;
  const bool active = row < rows;
  const int half = head_dim / 2;
  const int j = (lane % kLanes) * kVec;
  float c[kVec], s[kVec], z1[kVec], z2[kVec], g1[kVec], g2[kVec];
  float r = 0.f, dot = 0.f;
  if (active) {
    const int64_t t = (row / heads) % seq_len;
    r = rstd[row];
    float a[kVec], b[kVec];
    LoadVec(x + row * head_dim + j, a);
    LoadVec(x + row * head_dim + j + half, b);
    LoadVec(dz + row * head_dim + j, g1);
    LoadVec(dz + row * head_dim + j + half, g2);
    LoadTable<kVec>(cos + t * half + j, c);
    LoadTable<kVec>(sin + t * half + j, s);
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      z1[i] = (a[i] * c[i] + b[i] * s[i]) * r;
      z2[i] = (-a[i] * s[i] + b[i] * c[i]) * r;
      dot += g1[i] * z1[i] + g2[i] * z2[i];
    }
  }
  dot = RowSum<kLanes>(dot) / static_cast<float>(head_dim);
  if (!active) return;
  float d1[kVec], d2[kVec];
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    const float dy1 = r * (g1[i] - z1[i] * dot), dy2 = r * (g2[i] - z2[i] * dot);
    d1[i] = dy1 * c[i] - dy2 * s[i];
    d2[i] = dy1 * s[i] + dy2 * c[i];
  }
  StoreVec(dx + row * head_dim + j, d1);
  StoreVec(dx + row * head_dim + j + half, d2);
}

// Lanes per row of the vector kernels for this head_dim and element size: half / kVec when that is
// a power of two up to 32, else 0 (no vector kernel).
int VectorLanes(int64_t head_dim, int element_bytes) {
  const int vec = 16 / element_bytes;
  if (head_dim % (2 * vec) != 0) return 0;
  const int64_t lanes = head_dim / 2 / vec;
  for (int l = 1; l <= 32; l *= 2) {
    if (lanes == l) return l;
  }
  return 0;
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

int ElementBytes(RotaryType type) { return type == RotaryType::kFloat32 ? 4 : 2; }

unsigned VectorBlocks(int64_t rows, int lanes) {
  const int64_t rows_per_block = static_cast<int64_t>(kWarpsPerBlock) * (32 / lanes);
  return static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block);
}

// Launches kernel<T, lanes> for the run-time `lanes` (1..32, a power of two).
template <typename T, template <typename, int> class Launch, typename... Args>
void DispatchLanes(int lanes, Args... args) {
  switch (lanes) {
    case 1:
      Launch<T, 1>::Run(args...);
      break;
    case 2:
      Launch<T, 2>::Run(args...);
      break;
    case 4:
      Launch<T, 4>::Run(args...);
      break;
    case 8:
      Launch<T, 8>::Run(args...);
      break;
    case 16:
      Launch<T, 16>::Run(args...);
      break;
    default:
      Launch<T, 32>::Run(args...);
      break;
  }
}

template <typename T, int kLanes>
struct ForwardLaunch {
  static void Run(gpu::Stream st, const void* x, const float* cos, const float* sin, int64_t rows,
                  int64_t heads, int64_t seq_len, int d, float eps, void* z, float* rstd) {
    VectorForwardKernel<T, kLanes><<<VectorBlocks(rows, kLanes), kWarpsPerBlock * 32, 0, st>>>(
        static_cast<const T*>(x), cos, sin, rows, heads, seq_len, d, eps, static_cast<T*>(z), rstd);
  }
};

template <typename T, int kLanes>
struct BackwardLaunch {
  static void Run(gpu::Stream st, const void* x, const void* dz, const float* cos, const float* sin,
                  const float* rstd, int64_t rows, int64_t heads, int64_t seq_len, int d,
                  void* dx) {
    VectorBackwardKernel<T, kLanes><<<VectorBlocks(rows, kLanes), kWarpsPerBlock * 32, 0, st>>>(
        static_cast<const T*>(x), static_cast<const T*>(dz), cos, sin, rstd, rows, heads, seq_len,
        d, static_cast<T*>(dx));
  }
};

const char* LastError() { return gpu::LastErrorText(); }

unsigned Blocks(int64_t rows) {
  return static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

}  // namespace

bool RotaryVectorKernelFits(RotaryType type, int64_t head_dim, const void* x, const void* other,
                            const float* cos, const float* sin) {
  return VectorLanes(head_dim, ElementBytes(type)) > 0 && Aligned16(x) && Aligned16(other) &&
         Aligned16(cos) && Aligned16(sin);
}

const char* LaunchRotaryRmsNormForwardVector(const void* x, RotaryType type, const float* cos,
                                             const float* sin, int64_t rows, int64_t heads,
                                             int64_t seq_len, int64_t head_dim, float eps, void* z,
                                             float* rstd, void* stream) {
  if (!RotaryVectorKernelFits(type, head_dim, x, z, cos, sin)) {
    return "vector kernel: head_dim or alignment not supported";
  }
  if (rows == 0) return nullptr;
  auto st = static_cast<gpu::Stream>(stream);
  const int lanes = VectorLanes(head_dim, ElementBytes(type));
  const int d = static_cast<int>(head_dim);
  switch (type) {
    case RotaryType::kFloat32:
      DispatchLanes<float, ForwardLaunch>(lanes, st, x, cos, sin, rows, heads, seq_len, d, eps, z,
                                          rstd);
      break;
    case RotaryType::kBFloat16:
      DispatchLanes<gpu::BFloat16, ForwardLaunch>(lanes, st, x, cos, sin, rows, heads, seq_len, d,
                                                  eps, z, rstd);
      break;
    case RotaryType::kFloat16:
      DispatchLanes<gpu::Half, ForwardLaunch>(lanes, st, x, cos, sin, rows, heads, seq_len, d, eps,
                                              z, rstd);
      break;
  }
  return LastError();
}

const char* LaunchRotaryRmsNormBackwardVector(const void* x, const void* dz, RotaryType type,
                                              const float* cos, const float* sin, const float* rstd,
                                              int64_t rows, int64_t heads, int64_t seq_len,
                                              int64_t head_dim, void* dx, void* stream) {
  if (!RotaryVectorKernelFits(type, head_dim, x, dz, cos, sin) || !Aligned16(dx)) {
    return "vector kernel: head_dim or alignment not supported";
  }
  if (rows == 0) return nullptr;
  auto st = static_cast<gpu::Stream>(stream);
  const int lanes = VectorLanes(head_dim, ElementBytes(type));
  const int d = static_cast<int>(head_dim);
  switch (type) {
    case RotaryType::kFloat32:
      DispatchLanes<float, BackwardLaunch>(lanes, st, x, dz, cos, sin, rstd, rows, heads, seq_len,
                                           d, dx);
      break;
    case RotaryType::kBFloat16:
      DispatchLanes<gpu::BFloat16, BackwardLaunch>(lanes, st, x, dz, cos, sin, rstd, rows, heads,
                                                   seq_len, d, dx);
      break;
    case RotaryType::kFloat16:
      DispatchLanes<gpu::Half, BackwardLaunch>(lanes, st, x, dz, cos, sin, rstd, rows, heads,
                                               seq_len, d, dx);
      break;
  }
  return LastError();
}

const char* LaunchRotaryRmsNormForward(const void* x, RotaryType type, const float* cos,
                                       const float* sin, int64_t rows, int64_t heads,
                                       int64_t seq_len, int64_t head_dim, float eps, void* z,
                                       float* rstd, void* stream) {
  if (head_dim % 2 != 0 || head_dim > 2 * 32 * kMaxPairsPerLane) return "head_dim not supported";
  if (rows == 0) return nullptr;
  auto st = static_cast<gpu::Stream>(stream);
  const int d = static_cast<int>(head_dim);
  switch (type) {
    case RotaryType::kFloat32:
      ForwardKernel<float><<<Blocks(rows), kWarpsPerBlock * 32, 0, st>>>(
          static_cast<const float*>(x), cos, sin, rows, heads, seq_len, d, eps,
          static_cast<float*>(z), rstd);
      break;
    case RotaryType::kBFloat16:
      ForwardKernel<gpu::BFloat16><<<Blocks(rows), kWarpsPerBlock * 32, 0, st>>>(
          static_cast<const gpu::BFloat16*>(x), cos, sin, rows, heads, seq_len, d, eps,
          static_cast<gpu::BFloat16*>(z), rstd);
      break;
    case RotaryType::kFloat16:
      ForwardKernel<gpu::Half><<<Blocks(rows), kWarpsPerBlock * 32, 0, st>>>(
          static_cast<const gpu::Half*>(x), cos, sin, rows, heads, seq_len, d, eps,
          static_cast<gpu::Half*>(z), rstd);
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
  auto st = static_cast<gpu::Stream>(stream);
  const int d = static_cast<int>(head_dim);
  switch (type) {
    case RotaryType::kFloat32:
      BackwardKernel<float><<<Blocks(rows), kWarpsPerBlock * 32, 0, st>>>(
          static_cast<const float*>(x), static_cast<const float*>(dz), cos, sin, rstd, rows, heads,
          seq_len, d, static_cast<float*>(dx));
      break;
    case RotaryType::kBFloat16:
      BackwardKernel<gpu::BFloat16><<<Blocks(rows), kWarpsPerBlock * 32, 0, st>>>(
          static_cast<const gpu::BFloat16*>(x), static_cast<const gpu::BFloat16*>(dz), cos, sin,
          rstd, rows, heads, seq_len, d, static_cast<gpu::BFloat16*>(dx));
      break;
    case RotaryType::kFloat16:
      BackwardKernel<gpu::Half><<<Blocks(rows), kWarpsPerBlock * 32, 0, st>>>(
          static_cast<const gpu::Half*>(x), static_cast<const gpu::Half*>(dz), cos, sin, rstd, rows,
          heads, seq_len, d, static_cast<gpu::Half*>(dx));
      break;
  }
  return LastError();
}

}  // namespace xv::trainer::kernels
