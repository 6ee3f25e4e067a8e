#include "trainer/kernels/softcap_cross_entropy_kernels.h"

#include "trainer/kernels/gpu_portability.h"

#include <cfloat>

namespace xv::trainer::kernels {

namespace {

constexpr int kThreads = 256;

template <typename T>
__device__ __forceinline__ float ToFloat(T v);
template <>
__device__ __forceinline__ float ToFloat<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ float ToFloat<gpu::BFloat16>(gpu::BFloat16 v) {
  return gpu::BFloat16ToFloat(v);
}
template <>
__device__ __forceinline__ float ToFloat<gpu::Half>(gpu::Half v) {
  return gpu::HalfToFloat(v);
}

template <typename T>
__device__ __forceinline__ T FromFloat(float v);
template <>
__device__ __forceinline__ float FromFloat<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ gpu::BFloat16 FromFloat<gpu::BFloat16>(float v) {
  return gpu::FloatToBFloat16(v);  // round to nearest even, as ATen's cast
}
template <>
__device__ __forceinline__ gpu::Half FromFloat<gpu::Half>(float v) {
  return gpu::FloatToHalf(v);
}

// kFast: exp through the special-function unit (__expf, ~2 ulp) and tanh from it, as
// sign(y) (1 - 2 / (exp(2|y|) + 1)) (absolute error ~1e-7); else the libm functions.
template <bool kFast>
__device__ __forceinline__ float Exp(float x) {
  return kFast ? __expf(x) : expf(x);
}
template <bool kFast>
__device__ __forceinline__ float Tanh(float y) {
  if (!kFast) return tanhf(y);
  const float e = __expf(2.f * fabsf(y));
  return copysignf(1.f - __fdividef(2.f, e + 1.f), y);
}

template <bool kFast>
__device__ __forceinline__ float Capped(float z, float cap) {
  return cap > 0.f ? cap * Tanh<kFast>(z / cap) : z;
}

// Elements per 16-byte vector.
template <typename T>
struct Vec {
  static constexpr int kN = 16 / sizeof(T);
  T v[kN];
};

// Merges (max, sum of exp(x - max)) pairs.
__device__ __forceinline__ void Merge(float& m, float& s, float m2, float s2) {
  if (m2 > m) {
    s = s * expf(m - m2) + s2;  // an empty side (m = -FLT_MAX, s = 0) adds nothing
    m = m2;
  } else if (m2 > -FLT_MAX) {
    s = s + s2 * expf(m2 - m);
  }
}

template <typename T, bool kVector, bool kFast>
__global__ void __launch_bounds__(kThreads)
    ForwardKernel(const T* __restrict__ logits, const int64_t* __restrict__ targets, int64_t vocab,
                  float cap, float* __restrict__ lse_out, float* __restrict__ loss_out) {
  const int64_t row = blockIdx.x;
  const T* x = logits + row * vocab;
  float m = -FLT_MAX, s = 0.f;
  if (kVector) {
    constexpr int kN = Vec<T>::kN;
    const Vec<T>* xv = reinterpret_cast<const Vec<T>*>(x);
    for (int64_t i = threadIdx.x; i < vocab / kN; i += kThreads) {
      Vec<T> v = xv[i];
      if (kFast) {
        // One rescale per vector, not per element: the vector's max first.
        float c[kN], vm = -FLT_MAX;
#pragma unroll
        for (int k = 0; k < kN; ++k) {
          c[k] = Capped<kFast>(ToFloat(v.v[k]), cap);
          vm = fmaxf(vm, c[k]);
        }
        if (vm > m) {
          s *= Exp<kFast>(m - vm);
          m = vm;
        }
#pragma unroll
        for (int k = 0; k < kN; ++k) s += Exp<kFast>(c[k] - m);
      } else {
#pragma unroll
        for (int k = 0; k < kN; ++k) {
          float c = Capped<kFast>(ToFloat(v.v[k]), cap);
          if (c > m) {
            s = s * expf(m - c) + 1.f;
            m = c;
          } else {
            s += expf(c - m);
          }
        }
      }
    }
  } else {
    for (int64_t j = threadIdx.x; j < vocab; j += kThreads) {
      float c = Capped<kFast>(ToFloat(x[j]), cap);
      if (c > m) {
        s = s * Exp<kFast>(m - c) + 1.f;
        m = c;
      } else {
        s += Exp<kFast>(c - m);
      }
    }
  }
  // Warp, then block reduction of (m, s).
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    float m2 = gpu::ShuffleXor(m, offset);
    float s2 = gpu::ShuffleXor(s, offset);
    Merge(m, s, m2, s2);
  }
  __shared__ float sm[kThreads / 32], ss[kThreads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    sm[warp] = m;
    ss[warp] = s;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float bm = sm[0], bs = ss[0];
    for (int w = 1; w < kThreads / 32; ++w) Merge(bm, bs, sm[w], ss[w]);
    const float lse = bm + logf(bs);
    lse_out[row] = lse;
    const int64_t t = targets[row];
    // A target outside the vocabulary gives NaN (the loop's divergence check names it).
    loss_out[row] =
        t < 0 ? 0.f
              : (t < vocab ? lse - Capped<kFast>(ToFloat(x[t]), cap) : __int_as_float(0x7fc00000));
  }
}

template <typename T, bool kVector, bool kFast>
__global__ void __launch_bounds__(kThreads)
    BackwardKernel(const T* __restrict__ logits, const int64_t* __restrict__ targets,
                   const float* __restrict__ lse_in, const float* __restrict__ row_scale,
                   int64_t vocab, float cap, T* __restrict__ dlogits) {
  const int64_t row = blockIdx.x;
  const T* x = logits + row * vocab;
  T* dx = dlogits + row * vocab;
  const float lse = lse_in[row];
  const float scale = row_scale[row];
  const int64_t t = targets[row];
  auto grad = [&](float z, int64_t j) {
    float g;
    if (cap > 0.f) {
      const float th = Tanh<kFast>(z / cap);
      const float p = Exp<kFast>(cap * th - lse);
      g = (p - (j == t ? 1.f : 0.f)) * scale * (1.f - th * th);
    } else {
      g = (Exp<kFast>(z - lse) - (j == t ? 1.f : 0.f)) * scale;
    }
    return g;
  };
  if (kVector) {
    constexpr int kN = Vec<T>::kN;
    const Vec<T>* xv = reinterpret_cast<const Vec<T>*>(x);
    Vec<T>* dv = reinterpret_cast<Vec<T>*>(dx);
    for (int64_t i = threadIdx.x; i < vocab / kN; i += kThreads) {
      Vec<T> v = xv[i], out;
#pragma unroll
      for (int k = 0; k < kN; ++k) out.v[k] = FromFloat<T>(grad(ToFloat(v.v[k]), i * kN + k));
      dv[i] = out;
    }
  } else {
    for (int64_t j = threadIdx.x; j < vocab; j += kThreads)
      dx[j] = FromFloat<T>(grad(ToFloat(x[j]), j));
  }
}

template <typename T>
bool Aligned(const void* p, int64_t vocab) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0 && vocab % Vec<T>::kN == 0;
}

template <typename T, bool kFast>
const char* Forward(const void* logits, const int64_t* targets, int64_t rows, int64_t vocab,
                    float cap, float* lse, float* loss, gpu::Stream stream) {
  if (rows == 0) return nullptr;
  const T* x = static_cast<const T*>(logits);
  if (Aligned<T>(logits, vocab)) {
    ForwardKernel<T, true, kFast><<<rows, kThreads, 0, stream>>>(x, targets, vocab, cap, lse, loss);
  } else {
    ForwardKernel<T, false, kFast>
        <<<rows, kThreads, 0, stream>>>(x, targets, vocab, cap, lse, loss);
  }
  return gpu::LastErrorText();
}

template <typename T>
const char* Forward(const void* logits, const int64_t* targets, int64_t rows, int64_t vocab,
                    float cap, bool fast_math, float* lse, float* loss, gpu::Stream stream) {
  return fast_math ? Forward<T, true>(logits, targets, rows, vocab, cap, lse, loss, stream)
                   : Forward<T, false>(logits, targets, rows, vocab, cap, lse, loss, stream);
}

template <typename T, bool kFast>
const char* Backward(const void* logits, const int64_t* targets, const float* lse,
                     const float* row_scale, int64_t rows, int64_t vocab, float cap, void* dlogits,
                     gpu::Stream stream) {
  if (rows == 0) return nullptr;
  const T* x = static_cast<const T*>(logits);
  T* dx = static_cast<T*>(dlogits);
  if (Aligned<T>(logits, vocab) && Aligned<T>(dlogits, vocab)) {
    BackwardKernel<T, true, kFast>
        <<<rows, kThreads, 0, stream>>>(x, targets, lse, row_scale, vocab, cap, dx);
  } else {
    BackwardKernel<T, false, kFast>
        <<<rows, kThreads, 0, stream>>>(x, targets, lse, row_scale, vocab, cap, dx);
  }
  return gpu::LastErrorText();
}

template <typename T>
const char* Backward(const void* logits, const int64_t* targets, const float* lse,
                     const float* row_scale, int64_t rows, int64_t vocab, float cap, bool fast_math,
                     void* dlogits, gpu::Stream stream) {
  return fast_math
             ? Backward<T, true>(logits, targets, lse, row_scale, rows, vocab, cap, dlogits, stream)
             : Backward<T, false>(logits, targets, lse, row_scale, rows, vocab, cap, dlogits,
                                  stream);
}

}  // namespace

const char* LaunchSoftcapCrossEntropyForward(const void* logits, LogitsType type,
                                             const int64_t* targets, int64_t rows, int64_t vocab,
                                             float softcap, bool fast_math, float* lse, float* loss,
                                             void* stream) {
  auto s = static_cast<gpu::Stream>(stream);
  const bool f = fast_math;
  switch (type) {
    case LogitsType::kFloat32:
      return Forward<float>(logits, targets, rows, vocab, softcap, f, lse, loss, s);
    case LogitsType::kBFloat16:
      return Forward<gpu::BFloat16>(logits, targets, rows, vocab, softcap, f, lse, loss, s);
    case LogitsType::kFloat16:
      return Forward<gpu::Half>(logits, targets, rows, vocab, softcap, f, lse, loss, s);
  }
  return "unknown logits type";
}

const char* LaunchSoftcapCrossEntropyBackward(const void* logits, LogitsType type,
                                              const int64_t* targets, const float* lse,
                                              const float* row_scale, int64_t rows, int64_t vocab,
                                              float softcap, bool fast_math, void* dlogits,
                                              void* stream) {
  auto s = static_cast<gpu::Stream>(stream);
  const bool f = fast_math;
  switch (type) {
    case LogitsType::kFloat32:
      return Backward<float>(logits, targets, lse, row_scale, rows, vocab, softcap, f, dlogits, s);
    case LogitsType::kBFloat16:
      return Backward<gpu::BFloat16>(logits, targets, lse, row_scale, rows, vocab, softcap, f,
                                     dlogits, s);
    case LogitsType::kFloat16:
      return Backward<gpu::Half>(logits, targets, lse, row_scale, rows, vocab, softcap, f, dlogits,
                                 s);
  }
  return "unknown logits type";
}

}  // namespace xv::trainer::kernels
