// Maps how a trainer process ended to the experiment state and failure taxonomy the daemon stores
// (docs/events.md exit codes; Experiment.failure_kind in proto/xv/v1/types.proto).
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "worker/child_process.h"

namespace xv::worker {

struct AttemptOutcome {
  std::string state;         // succeeded | diverged | failed | invalid | timed_out | cancelled
  std::string failure_kind;  // "" on success; invalid_config | diverged | oom | data_error |
                             // crashed | timed_out | cancelled
  std::string failure_detail;
};

// Why the worker itself ended the child, if it did.
enum class KillReason { kNone, kDeadline, kCancel };

// `error_message` is the message of the trainer's last `error` event ("" when none); it becomes the
// failure detail where there is one. A kill by the worker wins over the exit status (a trainer
// TERMed at its deadline may still exit 0 or 1 from its handler).
AttemptOutcome ClassifyExit(const ExitStatus& exit, KillReason reason, double deadline_s,
                            const std::string& error_message);

// "SIGSEGV" for 11, "signal 99" for unknown numbers.
std::string SignalName(int sig);

}  // namespace xv::worker
