// KernelProfileWindow: a Kineto (LibTorch profiler) trace of a few training steps, to rank the
// GPU's kernels by time (bench/gpu-kernel-table.py reads the trace).
//
// Off unless XV_TRAIN_PROFILE_TRACE names the trace file (Chrome trace JSON).
// XV_TRAIN_PROFILE_STEPS
// ("FIRST:COUNT", default "12:2") picks the optimizer steps profiled; the profiled steps are slower
// than the others, so a profiled run's tok/s is not a throughput figure. Builds whose LibTorch has
// no CUDA (or is older than 2.1) print that the trace is not available and train on. Thread-safety:
// used by the training thread only.
#pragma once

#include <cstdint>
#include <string>

namespace xv::trainer {

class KernelProfileWindow {
 public:
  // Reads the two environment variables above.
  static KernelProfileWindow FromEnvironment();

  // At the start of optimizer step `step`: starts the profiler at the first profiled step.
  void BeforeStep(int64_t step);
  // At the end of optimizer step `step`: after the last profiled step, stops the profiler, writes
  // the trace and says where on stderr (or why it could not).
  void AfterStep(int64_t step);

 private:
  std::string trace_path_;
  int64_t first_step_ = 12;
  int64_t steps_ = 2;
  bool active_ = false;
};

}  // namespace xv::trainer
