// Speed levers of xv-train on GPUs, each with an environment switch for ablations.
//
// A lever changes how the trainer computes, never what the recipe asks for; each is on by default
// and `XV_TRAIN_<NAME>=0` (or off/false/no) switches it off for the process, so
// `bench/gpu-throughput.sh` can measure the configuration with that one lever missing:
//   XV_TRAIN_BF16_EMBEDDINGS  the token and value embeddings are bf16 parameters under a bf16
//                             recipe (upstream init_weights does this; fp32 otherwise)
//   XV_TRAIN_RELU2            ReLU^2 as one node in the activations' dtype (ReluSquared), not
//                             relu().square(), which autocast runs in fp32
//   XV_TRAIN_FUSED_RELU2      ReluSquared in one CUDA kernel each way (CUDA builds; off: relu and a
//                             product)
//   XV_TRAIN_FUSED_RESIDUAL   the residual mix resid_lambda * x + x0_lambda * x0 in one CUDA kernel
//                             each way (CUDA builds; off: the composite, whose 0-dim device scalars
//                             make ATen take its slow broadcasting path)
//   XV_TRAIN_FUSED_ROTARY     rotary + QK RMSNorm in one CUDA kernel each way (CUDA builds;
//                             off: the composite)
//   XV_TRAIN_VECTOR_ROTARY    those rotary kernels with 16-byte loads and stores, several lanes per
//                             head vector (off: one warp per head vector, 2-byte accesses in bf16)
//   XV_TRAIN_FUSED_CE         the chunked cross-entropy's CUDA kernels (CUDA builds; off: its
//                             composite)
//   XV_TRAIN_CHUNKED_CE       soft-cap + cross-entropy over chunks of positions (no fp32 logits for
//                             the whole batch, the logits' gradient written in their own dtype)
//   XV_TRAIN_CUDNN_ATTENTION  full-causal layers of the flash backend through cuDNN's attention
//                             (CUDA, LibTorch >= 2.5, checked against the math backend once)
//   XV_TRAIN_RECOMPUTE_RELU2  ReLU^2 and c_proj as one node that saves the MLP's pre-activation
//                             only and recomputes relu(h)^2 in the backward (off: ReluSquared's
//                             output is saved too, by c_proj)
//   XV_TRAIN_FAST_CE          those kernels with fast exp and tanh for bf16/fp16 logits (off:
//   libm's
//                             expf and tanhf)
// Thread-safety: reads the environment each call; call from one thread at start-up.
#pragma once

#include <cstdlib>
#include <cstring>
#include <string>

namespace xv::trainer {

// False when the environment variable `name` is set to 0, off, false or no; true otherwise.
inline bool SpeedLeverEnabled(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return true;
  for (const char* off : {"0", "off", "false", "no", "OFF", "FALSE", "NO"}) {
    if (std::strcmp(value, off) == 0) return false;
  }
  return true;
}

inline constexpr const char kLeverBf16Embeddings[] = "XV_TRAIN_BF16_EMBEDDINGS";
inline constexpr const char kLeverChunkedCrossEntropy[] = "XV_TRAIN_CHUNKED_CE";
inline constexpr const char kLeverFusedCrossEntropy[] = "XV_TRAIN_FUSED_CE";
inline constexpr const char kLeverReluSquared[] = "XV_TRAIN_RELU2";
inline constexpr const char kLeverFusedRotary[] = "XV_TRAIN_FUSED_ROTARY";
inline constexpr const char kLeverFusedReluSquared[] = "XV_TRAIN_FUSED_RELU2";
inline constexpr const char kLeverFusedResidual[] = "XV_TRAIN_FUSED_RESIDUAL";
inline constexpr const char kLeverVectorRotary[] = "XV_TRAIN_VECTOR_ROTARY";
inline constexpr const char kLeverCudnnAttention[] = "XV_TRAIN_CUDNN_ATTENTION";
inline constexpr const char kLeverRecomputeReluSquared[] = "XV_TRAIN_RECOMPUTE_RELU2";
inline constexpr const char kLeverFastCrossEntropy[] = "XV_TRAIN_FAST_CE";

}  // namespace xv::trainer
