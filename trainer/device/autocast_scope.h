// AutocastScope: enables LibTorch autocast to `dtype` on a CUDA/ROCm device for its lifetime (the
// C++ form of `with torch.amp.autocast(device_type="cuda", dtype=...)`), and restores the previous
// state and clears the cast cache when it ends. On the CPU, and for float32, it does nothing:
// xv-train runs fp32 on the CPU. Hides the autocast API change between LibTorch 1.13 and 2.4+.
// Thread-safety: autocast state is thread-local; use the scope on the thread that runs the model.
#pragma once

#include <torch/torch.h>

namespace xv::trainer {

class AutocastScope {
 public:
  AutocastScope(const torch::Device& device, torch::ScalarType dtype);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

  bool active() const { return active_; }

 private:
  bool active_ = false;
  bool prev_enabled_ = false;
  torch::ScalarType prev_dtype_ = torch::kFloat;
};

}  // namespace xv::trainer
