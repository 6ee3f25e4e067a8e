#include "trainer/train/step_health_probe.h"

namespace xv::trainer {

StepHealthProbe::StepHealthProbe(
    std::vector<std::pair<std::string, torch::Tensor>> named_parameters) {
  for (auto& [name, p] : named_parameters) {
    names_.push_back(name);
    params_.push_back(p);
  }
}

void StepHealthProbe::MeasureGradients() {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  grads.reserve(params_.size());
  for (const auto& p : params_) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) {
    grad_norm_ = torch::Tensor();
    return;
  }
  // As torch.nn.utils.clip_grad_norm_ computes it: per-tensor norms, then the norm of those.
  grad_norm_ = torch::stack(at::_foreach_norm(grads)).to(torch::kFloat).norm();
}

void StepHealthProbe::MeasureParameters() {
  torch::NoGradGuard no_grad;
  if (params_.empty()) {
    param_norms_ = torch::Tensor();
    return;
  }
  param_norms_ = torch::stack(at::_foreach_norm(params_)).to(torch::kFloat);
}

StepHealth StepHealthProbe::Read(const std::vector<torch::Tensor>& micro_step_losses) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> parts;
  torch::Device device = !params_.empty() ? params_[0].device() : torch::Device(torch::kCPU);
  if (!micro_step_losses.empty()) {
    device = micro_step_losses[0].device();
    parts.push_back(torch::stack(micro_step_losses).to(torch::kFloat).flatten());
  }
  const auto fp32 = torch::TensorOptions().dtype(torch::kFloat).device(device);
  parts.push_back(grad_norm_.defined() ? grad_norm_.reshape({1}) : torch::zeros({1}, fp32));
  parts.push_back(param_norms_.defined()
                      ? param_norms_
                      : torch::zeros({static_cast<int64_t>(params_.size())}, fp32));
  torch::Tensor host = torch::cat(parts).cpu().contiguous();
  const float* v = host.data_ptr<float>();
  StepHealth h;
  const size_t losses = micro_step_losses.size();
  h.micro_step_losses.assign(v, v + losses);
  h.grad_norm = v[losses];
  h.parameter_norms.assign(v + losses + 1, v + host.numel());
  grad_norm_ = torch::Tensor();
  param_norms_ = torch::Tensor();
  return h;
}

}  // namespace xv::trainer
