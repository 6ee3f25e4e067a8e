// StepHealthProbe: the device-side figures of the divergence rule (divergence_check.h) without a
// host sync of their own. Each step queues, on the parameters' device, the global gradient norm
// (before the optimizer step) and every parameter's L2 norm (after it), both through ATen's
// multi-tensor _foreach_norm (a few fused kernels on CUDA/ROCm); Read copies them to the host
// together with the micro-step losses in the one device-to-host copy the loop makes per step
// anyway. Cost: one extra read pass over the gradients and one over the parameters per optimizer
// step; on the CPU (LibTorch 1.13, one thread) 1.5 ms per step for cpu-tiny's 4.5M parameters,
// 0.4% of a step of only 64 tokens (tests/unit/trainer/train/training_loop_test.cc prints it).
// Thread-safety: not thread-safe; the training thread owns it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "trainer/train/divergence_check.h"

namespace xv::trainer {

class StepHealthProbe {
 public:
  // `named_parameters`: every trained tensor with its name (GPT::NamedParameters order); the
  // tensors are shared with the model, which must outlive the probe.
  explicit StepHealthProbe(std::vector<std::pair<std::string, torch::Tensor>> named_parameters);

  // After the backward passes, before the optimizer step: queues the global L2 norm of every
  // defined gradient (0 when none is defined).
  void MeasureGradients();
  // After the optimizer step: queues the L2 norm of each parameter.
  void MeasureParameters();
  // The step's host read: `micro_step_losses` (0-d tensors on the device), the gradient norm and
  // the parameter norms in one copy. Blocks until the device has computed them. Figures not
  // measured this step read as 0.
  StepHealth Read(const std::vector<torch::Tensor>& micro_step_losses);

  // Names of StepHealth::parameter_norms, one for one.
  const std::vector<std::string>& parameter_names() const { return names_; }

 private:
  std::vector<std::string> names_;
  std::vector<torch::Tensor> params_;
  torch::Tensor grad_norm_;    // 0-d fp32 on the device, or undefined
  torch::Tensor param_norms_;  // [params] fp32 on the device, or undefined
};

}  // namespace xv::trainer
