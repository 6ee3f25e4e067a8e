#include "trainer/device/autocast_scope.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

namespace xv::trainer {

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define XV_AUTOCAST_BY_DEVICE_TYPE 1
#endif

AutocastScope::AutocastScope(const torch::Device& device, torch::ScalarType dtype) {
  if (!device.is_cuda() || dtype == torch::kFloat) return;
  active_ = true;
#ifdef XV_AUTOCAST_BY_DEVICE_TYPE
  prev_enabled_ = at::autocast::is_autocast_enabled(at::kCUDA);
  prev_dtype_ = at::autocast::get_autocast_dtype(at::kCUDA);
  at::autocast::set_autocast_enabled(at::kCUDA, true);
  at::autocast::set_autocast_dtype(at::kCUDA, dtype);
#else
  prev_enabled_ = at::autocast::is_enabled();
  prev_dtype_ = at::autocast::get_autocast_gpu_dtype();
  at::autocast::set_enabled(true);
  at::autocast::set_autocast_gpu_dtype(dtype);
#endif
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
#ifdef XV_AUTOCAST_BY_DEVICE_TYPE
  at::autocast::set_autocast_enabled(at::kCUDA, prev_enabled_);
  at::autocast::set_autocast_dtype(at::kCUDA, prev_dtype_);
#else
  at::autocast::set_enabled(prev_enabled_);
  at::autocast::set_autocast_gpu_dtype(prev_dtype_);
#endif
}

}  // namespace xv::trainer
