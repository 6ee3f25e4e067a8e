#include "trainer/model/softcap_cross_entropy.h"

#include <algorithm>

#include "trainer/model/speed_levers.h"

#if defined(XV_TRAINER_CUDA_KERNELS)
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "trainer/kernels/softcap_cross_entropy_kernels.h"
#endif

namespace xv::trainer {

namespace {

enum class Reduction : int64_t { kMean = 0, kSum = 1, kNone = 2 };

Reduction ParseReduction(const std::string& reduction) {
  if (reduction == "mean") return Reduction::kMean;
  if (reduction == "sum") return Reduction::kSum;
  TORCH_CHECK(reduction == "none", "cross-entropy: reduction must be mean|none|sum, got ",
              reduction);
  return Reduction::kNone;
}

torch::ScalarType ComputeDtype(const torch::Tensor& logits) {
  return logits.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
}

// Soft-capped logits of one chunk in the compute dtype, and tanh(z / cap) (undefined without cap).
std::pair<torch::Tensor, torch::Tensor> CappedChunk(const torch::Tensor& chunk, double softcap) {
  torch::Tensor z = chunk.to(ComputeDtype(chunk));
  if (softcap <= 0) return {z, torch::Tensor()};
  torch::Tensor t = torch::tanh(z / softcap);
  return {t * softcap, t};
}

#if defined(XV_TRAINER_CUDA_KERNELS)
kernels::LogitsType KernelType(const torch::Tensor& t) {
  switch (t.scalar_type()) {
    case torch::kBFloat16:
      return kernels::LogitsType::kBFloat16;
    case torch::kHalf:
      return kernels::LogitsType::kFloat16;
    default:
      return kernels::LogitsType::kFloat32;
  }
}

// The kernels' fast math (XV_TRAIN_FAST_CE) for half-precision logits only: their own rounding
// (2^-8 relative in bf16) dwarfs its ~1e-7; fp32 and fp64 logits (the reference cases) keep libm's
// exp and tanh.
bool FastMath(const torch::Tensor& logits) {
  static const bool enabled = SpeedLeverEnabled(kLeverFastCrossEntropy);
  return enabled && logits.scalar_type() != torch::kFloat;
}
#endif

// (lse, per-row losses), fp32 [N] each, from the fused forward kernel.
std::pair<torch::Tensor, torch::Tensor> FusedForward(const torch::Tensor& logits,
                                                     const torch::Tensor& targets, double softcap) {
#if defined(XV_TRAINER_CUDA_KERNELS)
  c10::cuda::CUDAGuard guard(logits.device());
  torch::Tensor x = logits.contiguous();
  torch::Tensor t = targets.contiguous();
  auto f32 = x.options().dtype(torch::kFloat);
  torch::Tensor lse = torch::empty({x.size(0)}, f32);
  torch::Tensor losses = torch::empty({x.size(0)}, f32);
  const char* err = kernels::LaunchSoftcapCrossEntropyForward(
      x.data_ptr(), KernelType(x), t.data_ptr<int64_t>(), x.size(0), x.size(1),
      static_cast<float>(softcap), FastMath(x), lse.data_ptr<float>(), losses.data_ptr<float>(),
      at::cuda::getCurrentCUDAStream(x.device().index()).stream());
  TORCH_CHECK(err == nullptr, "fused cross-entropy forward kernel: ", err);
  return {lse, losses};
#else
  (void)logits, (void)targets, (void)softcap;
  TORCH_CHECK(false, "fused cross-entropy: this build has no CUDA kernels");
#endif
}

// The logits' gradient in their dtype from the fused backward kernel.
torch::Tensor FusedBackward(const torch::Tensor& logits, const torch::Tensor& targets,
                            const torch::Tensor& lse, const torch::Tensor& row_scale,
                            double softcap) {
#if defined(XV_TRAINER_CUDA_KERNELS)
  c10::cuda::CUDAGuard guard(logits.device());
  torch::Tensor x = logits.contiguous();
  torch::Tensor t = targets.contiguous();
  torch::Tensor l = lse.to(torch::kFloat).contiguous();
  torch::Tensor scale = row_scale.to(torch::kFloat).contiguous();
  torch::Tensor dx = torch::empty_like(x);
  const char* err = kernels::LaunchSoftcapCrossEntropyBackward(
      x.data_ptr(), KernelType(x), t.data_ptr<int64_t>(), l.data_ptr<float>(),
      scale.data_ptr<float>(), x.size(0), x.size(1), static_cast<float>(softcap), FastMath(x),
      dx.data_ptr(), at::cuda::getCurrentCUDAStream(x.device().index()).stream());
  TORCH_CHECK(err == nullptr, "fused cross-entropy backward kernel: ", err);
  return dx;
#else
  (void)logits, (void)targets, (void)lse, (void)row_scale, (void)softcap;
  TORCH_CHECK(false, "fused cross-entropy: this build has no CUDA kernels");
#endif
}

class SoftcapCrossEntropyFunction : public torch::autograd::Function<SoftcapCrossEntropyFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& logits,
                               const torch::Tensor& targets, double softcap, int64_t reduction,
                               int64_t chunk_rows, bool fused) {
    const int64_t n = logits.size(0);
    auto cdt = ComputeDtype(logits);
    torch::Tensor lse, losses;
    if (fused) {
      std::tie(lse, losses) = FusedForward(logits, targets, softcap);
    } else {
      lse = torch::empty({n}, logits.options().dtype(cdt));
      torch::Tensor picked = torch::empty({n}, logits.options().dtype(cdt));
      torch::Tensor safe_targets = targets.clamp_min(0);
      for (int64_t r0 = 0; r0 < n; r0 += chunk_rows) {
        const int64_t rows = std::min(chunk_rows, n - r0);
        torch::Tensor s = CappedChunk(logits.narrow(0, r0, rows), softcap).first;
        lse.narrow(0, r0, rows).copy_(s.logsumexp(-1));
        picked.narrow(0, r0, rows)
            .copy_(s.gather(1, safe_targets.narrow(0, r0, rows).unsqueeze(1)).squeeze(1));
      }
      losses = (lse - picked).masked_fill(targets.eq(-1), 0);
    }
    torch::Tensor valid = targets.ne(-1);
    ctx->save_for_backward({logits, targets, lse});
    ctx->saved_data["fused"] = fused;
    ctx->saved_data["softcap"] = softcap;
    ctx->saved_data["reduction"] = reduction;
    ctx->saved_data["chunk_rows"] = chunk_rows;
    switch (static_cast<Reduction>(reduction)) {
      case Reduction::kMean:
        return losses.sum() / valid.sum().to(cdt);
      case Reduction::kSum:
        return losses.sum();
      case Reduction::kNone:
        return losses;
    }
    return losses;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    auto saved = ctx->get_saved_variables();
    const torch::Tensor& logits = saved[0];
    const torch::Tensor& targets = saved[1];
    const torch::Tensor& lse = saved[2];
    const double softcap = ctx->saved_data["softcap"].toDouble();
    const auto reduction = static_cast<Reduction>(ctx->saved_data["reduction"].toInt());
    const int64_t chunk_rows = ctx->saved_data["chunk_rows"].toInt();
    const int64_t n = logits.size(0);
    auto cdt = ComputeDtype(logits);
    torch::Tensor valid = targets.ne(-1);
    // d loss / d loss_row for every row (0 where ignored), in the compute dtype.
    torch::Tensor row_scale;
    torch::Tensor grad = grad_outputs[0].to(cdt);
    if (reduction == Reduction::kNone) {
      row_scale = grad * valid.to(cdt);
    } else {
      torch::Tensor g = reduction == Reduction::kMean ? grad / valid.sum().to(cdt) : grad;
      row_scale = valid.to(cdt) * g;
    }
    if (ctx->saved_data["fused"].toBool()) {
      return {FusedBackward(logits, targets, lse, row_scale, softcap),
              torch::Tensor(),
              torch::Tensor(),
              torch::Tensor(),
              torch::Tensor(),
              torch::Tensor()};
    }
    torch::Tensor safe_targets = targets.clamp_min(0);
    torch::Tensor dlogits = torch::empty_like(logits, torch::MemoryFormat::Contiguous);
    for (int64_t r0 = 0; r0 < n; r0 += chunk_rows) {
      const int64_t rows = std::min(chunk_rows, n - r0);
      auto [s, t] = CappedChunk(logits.narrow(0, r0, rows), softcap);
      // softmax(s) - onehot(target), times the row's scale, times d(cap*tanh(z/cap))/dz = 1 - t^2.
      torch::Tensor p = (s - lse.narrow(0, r0, rows).unsqueeze(1)).exp_();
      torch::Tensor tgt = safe_targets.narrow(0, r0, rows).unsqueeze(1);
      p.scatter_add_(1, tgt, torch::full({rows, 1}, -1.0, p.options()));
      p.mul_(row_scale.narrow(0, r0, rows).unsqueeze(1));
      if (t.defined()) p.mul_(1 - t.square());
      dlogits.narrow(0, r0, rows).copy_(p);
    }
    return {dlogits,         torch::Tensor(), torch::Tensor(),
            torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

bool FusedCrossEntropyUsable(const torch::Tensor& logits) {
#if defined(XV_TRAINER_CUDA_KERNELS)
  static const bool enabled = SpeedLeverEnabled(kLeverFusedCrossEntropy);
  const auto dtype = logits.scalar_type();
  return enabled && logits.is_cuda() &&
         (dtype == torch::kFloat || dtype == torch::kBFloat16 || dtype == torch::kHalf);
#else
  (void)logits;
  return false;
#endif
}

int64_t DefaultCrossEntropyChunkRows(int64_t vocab_size) {
  return std::max<int64_t>(1, (int64_t{1} << 26) / std::max<int64_t>(1, vocab_size));
}

torch::Tensor SoftcapCrossEntropy(const torch::Tensor& logits, const torch::Tensor& targets,
                                  double softcap, const std::string& reduction, int64_t chunk_rows,
                                  bool allow_fused) {
  TORCH_CHECK(logits.dim() == 2, "cross-entropy: logits must be [N, V], got ", logits.sizes());
  TORCH_CHECK(targets.dim() == 1 && targets.size(0) == logits.size(0),
              "cross-entropy: targets must be [N] with N = ", logits.size(0), ", got ",
              targets.sizes());
  TORCH_CHECK(targets.scalar_type() == torch::kLong, "cross-entropy: targets must be int64");
  const Reduction r = ParseReduction(reduction);
  if (chunk_rows <= 0) chunk_rows = DefaultCrossEntropyChunkRows(logits.size(1));
  const bool fused = allow_fused && FusedCrossEntropyUsable(logits);
  return SoftcapCrossEntropyFunction::apply(logits, targets, softcap, static_cast<int64_t>(r),
                                            chunk_rows, fused);
}

torch::Tensor SoftcapCrossEntropyPlain(const torch::Tensor& logits, const torch::Tensor& targets,
                                       double softcap, const std::string& reduction) {
  torch::Tensor z = logits.scalar_type() == torch::kDouble ? logits : logits.to(torch::kFloat32);
  if (softcap > 0) z = softcap * torch::tanh(z / softcap);
  namespace F = torch::nn::functional;
  auto opts = F::CrossEntropyFuncOptions().ignore_index(-1);
  switch (ParseReduction(reduction)) {
    case Reduction::kNone:
      opts = opts.reduction(torch::kNone);
      break;
    case Reduction::kSum:
      opts = opts.reduction(torch::kSum);
      break;
    case Reduction::kMean:
      break;
  }
  return F::cross_entropy(z, targets, opts);
}

}  // namespace xv::trainer
