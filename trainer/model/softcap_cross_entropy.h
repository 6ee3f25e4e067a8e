// Soft-capped cross-entropy over chunks of positions: upstream's
//   logits = logits.float(); logits = softcap * tanh(logits / softcap)
//   F.cross_entropy(logits.view(-1, V), targets.view(-1), ignore_index=-1, reduction=...)
// computed without the fp32 logits of the whole batch ever existing. The forward upcasts one chunk
// of rows at a time, keeps each row's log-sum-exp (fp32, [N]) and the soft-capped logit of its
// target, and saves only the logits as they came (bf16 under autocast: half the bytes of one fp32
// copy, where the plain path saves two fp32 [N, V] tensors for its backward). The backward
// recomputes each chunk's soft-cap and softmax and writes the logits' gradient directly in the
// logits' dtype, chunk by chunk.
//
// A composite of ATen ops: runs wherever LibTorch runs (CPU, CUDA, ROCm) and is what every build
// uses; the plain path (SoftcapCrossEntropyPlain) is its reference in the tests. Thread-safety:
// stateless functions.
#pragma once

#include <cstdint>
#include <string>

#include <torch/torch.h>

namespace xv::trainer {

// Rows per chunk when none is given: 2^26 elements of fp32 (256 MiB) per chunk at most.
int64_t DefaultCrossEntropyChunkRows(int64_t vocab_size);

// logits: [N, V] floating point (any dtype; fp64 stays fp64, everything else computes in fp32);
// targets: int64 [N], -1 = ignored. softcap <= 0: no soft-cap. reduction: "mean" (over the rows not
// ignored; NaN when all are), "sum" or "none" ([N], 0 where ignored). chunk_rows <= 0: the default.
// Differentiable in `logits` (first order). Throws c10::Error on wrong shapes or reduction.
// allow_fused = false forces the composite (the tests compare the two).
torch::Tensor SoftcapCrossEntropy(const torch::Tensor& logits, const torch::Tensor& targets,
                                  double softcap, const std::string& reduction,
                                  int64_t chunk_rows = 0, bool allow_fused = true);

// True when SoftcapCrossEntropy runs the fused kernels on `logits` (CUDA build, CUDA tensor of
// fp32/bf16/fp16, XV_TRAIN_FUSED_CE not 0).
bool FusedCrossEntropyUsable(const torch::Tensor& logits);

// The same function computed the plain way (upcast, soft-cap, F::cross_entropy), as upstream does.
torch::Tensor SoftcapCrossEntropyPlain(const torch::Tensor& logits, const torch::Tensor& targets,
                                       double softcap, const std::string& reduction);

}  // namespace xv::trainer
