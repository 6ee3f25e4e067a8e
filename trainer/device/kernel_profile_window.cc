#include "trainer/device/kernel_profile_window.h"

#include <cstdio>
#include <cstdlib>
#include <set>

#include <torch/torch.h>

#include "trainer/torch_compat.h"

#if defined(XV_TORCH_CUDA) && XV_TORCH_AT_LEAST(2, 1)
#include <torch/csrc/autograd/profiler_kineto.h>
#define XV_KINETO_TRACE 1
#else
#define XV_KINETO_TRACE 0
#endif

namespace xv::trainer {

KernelProfileWindow KernelProfileWindow::FromEnvironment() {
  KernelProfileWindow w;
  if (const char* path = std::getenv("XV_TRAIN_PROFILE_TRACE")) w.trace_path_ = path;
  if (const char* steps = std::getenv("XV_TRAIN_PROFILE_STEPS")) {
    long long first = 0, count = 0;
    if (std::sscanf(steps, "%lld:%lld", &first, &count) == 2 && first >= 0 && count > 0) {
      w.first_step_ = first;
      w.steps_ = count;
    } else {
      std::fprintf(stderr,
                   "xv-train: XV_TRAIN_PROFILE_STEPS='%.40s' is not FIRST:COUNT; profiling steps "
                   "%lld:%lld\n",
                   steps, static_cast<long long>(w.first_step_), static_cast<long long>(w.steps_));
    }
  }
  return w;
}

void KernelProfileWindow::BeforeStep(int64_t step) {
  if (trace_path_.empty() || step != first_step_) return;
#if XV_KINETO_TRACE
  namespace prof = torch::autograd::profiler;
  prof::ProfilerConfig config(prof::ProfilerState::KINETO);
  std::set<prof::ActivityType> activities = {prof::ActivityType::CPU, prof::ActivityType::CUDA};
  torch::cuda::synchronize();
  prof::prepareProfiler(config, activities);
  prof::enableProfiler(config, activities);
  active_ = true;
#else
  std::fprintf(stderr, "xv-train: no kernel trace: this LibTorch (%s) is not a CUDA build >= 2.1\n",
               compat::TorchVersionString().c_str());
  trace_path_.clear();
#endif
}

void KernelProfileWindow::AfterStep(int64_t step) {
  if (!active_ || step != first_step_ + steps_ - 1) return;
  active_ = false;
#if XV_KINETO_TRACE
  torch::cuda::synchronize();
  auto result = torch::autograd::profiler::disableProfiler();
  result->save(trace_path_);
  std::fprintf(stderr, "xv-train: kernel trace of steps %lld..%lld written to %s\n",
               static_cast<long long>(first_step_), static_cast<long long>(step),
               trace_path_.c_str());
#endif
}

}  // namespace xv::trainer
