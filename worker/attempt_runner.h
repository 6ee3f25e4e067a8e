// AttemptRunner: runs one attempt of one experiment as a child trainer process and reports what
// happened. The spec's trainer name picks a configured trainer plugin (worker/trainer_config.h):
// libtorch gets `<trainer> train --recipe-json SPEC_DIR/recipe.json --data DATA --device D` and
// SPEC_DIR/spec.json; command gets SPEC_DIR/recipe.json and XV_* variables
// (worker/command_trainer.h); autoresearch runs a copy of its source with the recipe in its
// constants (worker/autoresearch_trainer.h; a knob the source cannot take ends the attempt invalid
// before anything runs); a command-like trainer configured `sandbox: bubblewrap` runs under bwrap
// (worker/trainer_sandbox.h). Output: worker/trainer_output_relay.h; cancel and deadline:
// worker/kill_escalation.h; exit: worker/exit_classification.h.
//
// Thread-safety: Run is called by one thread at a time; Cancel may be called from any thread.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "worker/child_process.h"
#include "worker/device_health/device_health_monitor.h"
#include "worker/trainer_config.h"
#include "xv/v1/types.pb.h"
#include "xv/v1/workers.pb.h"

namespace xv::worker {

// How this worker starts its trainer; fixed for the worker's lifetime.
struct TrainerInvocation {
  std::string trainer_bin;      // path of xv-train (or a compatible program)
  std::string data_dir;         // passed as --data
  std::string device_flag;      // passed as --device: "cpu" or "cuda"
  std::string visible_devices;  // CUDA_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES ("" hides every GPU)
  std::string work_dir;         // attempts get SPEC_DIR = work_dir/exp-<id>-a<attempt>
  double kill_grace_s = 5.0;    // between TERM and KILL
  size_t stderr_tail_lines = 50;
  // Used when a spec carries no hard deadline: budget + this allowance (startup, compile, eval).
  double default_deadline_allowance_s = 600.0;
  // Device health (worker/device_health): the thermal guard before each attempt and sampling
  // during it, reported in Finished.health. Not owned; nullptr: neither (Finished has no health).
  device_health::DeviceHealthMonitor* health = nullptr;
  // The trainer plugins (xv-worker --config); empty means one `libtorch` trainer (trainer_bin).
  std::vector<TrainerConfig> trainers;
};

class AttemptRunner {
 public:
  // `launcher` must outlive the runner.
  AttemptRunner(TrainerInvocation invocation, ProcessLauncher* launcher);

  // Runs `spec` to the end and returns its Finished message (never fails: a launch failure is a
  // failed/crashed attempt). In SPEC_DIR (SpecDir) it writes the files the trainer reads, starts
  // the trainer in its own process group with CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES set,
  // relays its output (events.jsonl, trainer.stderr.log), TERMs the group at a cancel or the hard
  // deadline (the spec's, else budget + default_deadline_allowance_s) and KILLs it kill_grace_s
  // later, reaps it and classifies the exit. A trainer name this worker does not configure fails
  // the attempt before anything starts. `on_event` is called on this thread for every event, in
  // seq order, before Run returns.
  v1::Finished Run(const v1::ExperimentSpec& spec,
                   const std::function<void(const v1::TrainerEvent&)>& on_event);

  // Asks the running attempt (if it is `experiment_id`/`attempt`, or any when attempt is 0) to
  // stop: TERM now, KILL after the grace; it then finishes as cancelled.
  void Cancel(int64_t experiment_id, int32_t attempt);

  // The directory of an attempt.
  std::string SpecDir(int64_t experiment_id, int32_t attempt) const;

 private:
  // Makes this attempt the one Cancel matches (and clears an earlier cancel); ClearRunning undoes.
  void MarkRunning(const v1::ExperimentSpec& spec);
  void ClearRunning();
  // The thermal guard (when inv_.health is set): false when a cancel came while the device cooled.
  bool WaitForCoolDevice(const v1::ExperimentSpec& spec,
                         device_health::DeviceHealthMonitor::GuardResult* guard);

  const TrainerInvocation inv_;
  ProcessLauncher* const launcher_;
  Mutex mu_;
  int64_t running_experiment_ GUARDED_BY(mu_) = 0;
  int32_t running_attempt_ GUARDED_BY(mu_) = 0;
  std::atomic<bool> cancel_requested_{false};
};

}  // namespace xv::worker
