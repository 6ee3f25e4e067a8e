#include "trainer/kernels/elementwise_kernels.h"

#include "trainer/kernels/gpu_portability.h"

namespace xv::trainer::kernels {

namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 132 * 16;  // a few waves of an H200; grid-stride loops do the rest

template <typename T>
__device__ __forceinline__ float F(T v);
template <>
__device__ __forceinline__ float F<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ float F<gpu::BFloat16>(gpu::BFloat16 v) {
  return gpu::BFloat16ToFloat(v);
}
template <>
__device__ __forceinline__ float F<gpu::Half>(gpu::Half v) {
  return gpu::HalfToFloat(v);
}

template <typename T>
__device__ __forceinline__ T R(float v);
template <>
__device__ __forceinline__ float R<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ gpu::BFloat16 R<gpu::BFloat16>(float v) {
  return gpu::FloatToBFloat16(v);
}
template <>
__device__ __forceinline__ gpu::Half R<gpu::Half>(float v) {
  return gpu::FloatToHalf(v);
}

template <typename T>
struct alignas(16) Pack {
  static constexpr int kN = 16 / sizeof(T);
  T v[kN];
};

// Vector loop over n / kN packs, then a scalar tail; `op(i_pack_or_element, is_pack)`.
template <typename T>
bool Aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    ReluSquaredForwardKernel(const T* __restrict__ x, int64_t n, T* __restrict__ y) {
  constexpr int kN = Pack<T>::kN;
  const int64_t packs = n / kN;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = blockIdx.x * kThreads + threadIdx.x; i < packs; i += stride) {
    Pack<T> a = reinterpret_cast<const Pack<T>*>(x)[i], out;
#pragma unroll
    for (int k = 0; k < kN; ++k) {
      const float r = fmaxf(F(a.v[k]), 0.f);
      out.v[k] = R<T>(r * r);
    }
    reinterpret_cast<Pack<T>*>(y)[i] = out;
  }
  for (int64_t j = packs * kN + blockIdx.x * kThreads + threadIdx.x; j < n; j += stride) {
    const float r = fmaxf(F(x[j]), 0.f);
    y[j] = R<T>(r * r);
  }
}

template <typename T>
__device__ __forceinline__ T ReluSquaredGrad(T x, T dy) {
  const float r = fmaxf(F(x), 0.f);
  return R<T>(2.f * F(R<T>(F(dy) * r)));
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    ReluSquaredBackwardKernel(const T* __restrict__ x, const T* __restrict__ dy, int64_t n,
                              T* __restrict__ dx) {
  constexpr int kN = Pack<T>::kN;
  const int64_t packs = n / kN;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = blockIdx.x * kThreads + threadIdx.x; i < packs; i += stride) {
    Pack<T> a = reinterpret_cast<const Pack<T>*>(x)[i];
    Pack<T> g = reinterpret_cast<const Pack<T>*>(dy)[i], out;
#pragma unroll
    for (int k = 0; k < kN; ++k) out.v[k] = ReluSquaredGrad(a.v[k], g.v[k]);
    reinterpret_cast<Pack<T>*>(dx)[i] = out;
  }
  for (int64_t j = packs * kN + blockIdx.x * kThreads + threadIdx.x; j < n; j += stride)
    dx[j] = ReluSquaredGrad(x[j], dy[j]);
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    ResidualMixForwardKernel(const T* __restrict__ x, const T* __restrict__ x0, int64_t n,
                             const float* __restrict__ a_ptr, const float* __restrict__ b_ptr,
                             T* __restrict__ y) {
  constexpr int kN = Pack<T>::kN;
  const float a = *a_ptr, b = *b_ptr;
  const int64_t packs = n / kN;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = blockIdx.x * kThreads + threadIdx.x; i < packs; i += stride) {
    Pack<T> p = reinterpret_cast<const Pack<T>*>(x)[i];
    Pack<T> q = reinterpret_cast<const Pack<T>*>(x0)[i], out;
#pragma unroll
    for (int k = 0; k < kN; ++k) out.v[k] = R<T>(a * F(p.v[k]) + b * F(q.v[k]));
    reinterpret_cast<Pack<T>*>(y)[i] = out;
  }
  for (int64_t j = packs * kN + blockIdx.x * kThreads + threadIdx.x; j < n; j += stride)
    y[j] = R<T>(a * F(x[j]) + b * F(x0[j]));
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    ResidualMixBackwardKernel(const T* __restrict__ x, const T* __restrict__ x0,
                              const T* __restrict__ dy, int64_t n, const float* __restrict__ a_ptr,
                              const float* __restrict__ b_ptr, T* __restrict__ dx,
                              T* __restrict__ dx0, float* __restrict__ partials) {
  constexpr int kN = Pack<T>::kN;
  const float a = *a_ptr, b = *b_ptr;
  const int64_t packs = n / kN;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  float sa = 0.f, sb = 0.f;
  for (int64_t i = blockIdx.x * kThreads + threadIdx.x; i < packs; i += stride) {
    Pack<T> p = reinterpret_cast<const Pack<T>*>(x)[i];
    Pack<T> q = reinterpret_cast<const Pack<T>*>(x0)[i];
    Pack<T> g = reinterpret_cast<const Pack<T>*>(dy)[i], o1, o2;
#pragma unroll
    for (int k = 0; k < kN; ++k) {
      const float gk = F(g.v[k]);
      sa += gk * F(p.v[k]);
      sb += gk * F(q.v[k]);
      o1.v[k] = R<T>(a * gk);
      o2.v[k] = R<T>(b * gk);
    }
    reinterpret_cast<Pack<T>*>(dx)[i] = o1;
    reinterpret_cast<Pack<T>*>(dx0)[i] = o2;
  }
  for (int64_t j = packs * kN + blockIdx.x * kThreads + threadIdx.x; j < n; j += stride) {
    const float gk = F(dy[j]);
    sa += gk * F(x[j]);
    sb += gk * F(x0[j]);
    dx[j] = R<T>(a * gk);
    dx0[j] = R<T>(b * gk);
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    sa += gpu::ShuffleXor(sa, offset);
    sb += gpu::ShuffleXor(sb, offset);
  }
  __shared__ float wa[kThreads / 32], wb[kThreads / 32];
  if (threadIdx.x % 32 == 0) {
    wa[threadIdx.x / 32] = sa;
    wb[threadIdx.x / 32] = sb;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float ta = 0.f, tb = 0.f;
    for (int w = 0; w < kThreads / 32; ++w) {
      ta += wa[w];
      tb += wb[w];
    }
    partials[2 * blockIdx.x] = ta;
    partials[2 * blockIdx.x + 1] = tb;
  }
}

int Blocks(int64_t n, int per_thread) {
  const int64_t want = (n / per_thread + kThreads - 1) / kThreads;
  return static_cast<int>(want < 1 ? 1 : (want > kMaxBlocks ? kMaxBlocks : want));
}

const char* LastError() { return gpu::LastErrorText(); }

template <typename T>
const char* ReluFwd(const void* x, int64_t n, void* y, gpu::Stream s) {
  if (!Aligned<T>(x) || !Aligned<T>(y)) return "unaligned tensors";
  ReluSquaredForwardKernel<T>
      <<<Blocks(n, Pack<T>::kN), kThreads, 0, s>>>(static_cast<const T*>(x), n, static_cast<T*>(y));
  return LastError();
}

template <typename T>
const char* ReluBwd(const void* x, const void* dy, int64_t n, void* dx, gpu::Stream s) {
  if (!Aligned<T>(x) || !Aligned<T>(dy) || !Aligned<T>(dx)) return "unaligned tensors";
  ReluSquaredBackwardKernel<T><<<Blocks(n, Pack<T>::kN), kThreads, 0, s>>>(
      static_cast<const T*>(x), static_cast<const T*>(dy), n, static_cast<T*>(dx));
  return LastError();
}

template <typename T>
const char* MixFwd(const void* x, const void* x0, int64_t n, const float* a, const float* b,
                   void* y, gpu::Stream s) {
  if (!Aligned<T>(x) || !Aligned<T>(x0) || !Aligned<T>(y)) return "unaligned tensors";
  ResidualMixForwardKernel<T><<<Blocks(n, Pack<T>::kN), kThreads, 0, s>>>(
      static_cast<const T*>(x), static_cast<const T*>(x0), n, a, b, static_cast<T*>(y));
  return LastError();
}

template <typename T>
const char* MixBwd(const void* x, const void* x0, const void* dy, int64_t n, const float* a,
                   const float* b, void* dx, void* dx0, float* partials, gpu::Stream s) {
  if (!Aligned<T>(x) || !Aligned<T>(x0) || !Aligned<T>(dy) || !Aligned<T>(dx) || !Aligned<T>(dx0))
    return "unaligned tensors";
  ResidualMixBackwardKernel<T><<<ResidualMixBackwardPartials(n), kThreads, 0, s>>>(
      static_cast<const T*>(x), static_cast<const T*>(x0), static_cast<const T*>(dy), n, a, b,
      static_cast<T*>(dx), static_cast<T*>(dx0), partials);
  return LastError();
}

}  // namespace

#define XV_DISPATCH(type, call)    \
  switch (type) {                  \
    case ElementType::kFloat32: {  \
      using T = float;             \
      return call;                 \
    }                              \
    case ElementType::kBFloat16: { \
      using T = gpu::BFloat16;     \
      return call;                 \
    }                              \
    case ElementType::kFloat16: {  \
      using T = gpu::Half;         \
      return call;                 \
    }                              \
  }                                \
  return "unknown element type"

const char* LaunchReluSquaredForward(const void* x, ElementType type, int64_t n, void* y,
                                     void* stream) {
  if (n == 0) return nullptr;
  XV_DISPATCH(type, ReluFwd<T>(x, n, y, static_cast<gpu::Stream>(stream)));
}

const char* LaunchReluSquaredBackward(const void* x, const void* dy, ElementType type, int64_t n,
                                      void* dx, void* stream) {
  if (n == 0) return nullptr;
  XV_DISPATCH(type, ReluBwd<T>(x, dy, n, dx, static_cast<gpu::Stream>(stream)));
}

const char* LaunchResidualMixForward(const void* x, const void* x0, ElementType type, int64_t n,
                                     const float* a_ptr, const float* b_ptr, void* y,
                                     void* stream) {
  if (n == 0) return nullptr;
  XV_DISPATCH(type, MixFwd<T>(x, x0, n, a_ptr, b_ptr, y, static_cast<gpu::Stream>(stream)));
}

int64_t ResidualMixBackwardPartials(int64_t n) { return Blocks(n, 8); }

const char* LaunchResidualMixBackward(const void* x, const void* x0, const void* dy,
                                      ElementType type, int64_t n, const float* a_ptr,
                                      const float* b_ptr, void* dx, void* dx0, float* partials,
                                      void* stream) {
  if (n == 0) return nullptr;
  XV_DISPATCH(type, MixBwd<T>(x, x0, dy, n, a_ptr, b_ptr, dx, dx0, partials,
                              static_cast<gpu::Stream>(stream)));
}

}  // namespace xv::trainer::kernels
