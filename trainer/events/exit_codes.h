// xv-train's exit codes and the error kinds of its `error` event (docs/events.md). The worker maps
// them to experiment states: 3 -> diverged, 2 -> invalid, 4/5/1 -> failed with the kind recorded.
#pragma once

namespace xv::trainer {

enum ExitCode : int {
  kExitOk = 0,
  kExitCrash = 1,          // kind "crashed"
  kExitInvalidConfig = 2,  // kind "invalid_config" (also bad usage)
  kExitDiverged = 3,       // a `nan` event was written; kind "diverged"
  kExitOutOfMemory = 4,    // kind "oom"
  kExitDataError = 5,      // kind "data_error"
};

// The `kind` string of an error event for an exit code ("crashed" for unknown codes).
inline const char* ErrorKindForExitCode(int code) {
  switch (code) {
    case kExitInvalidConfig:
      return "invalid_config";
    case kExitDiverged:
      return "diverged";
    case kExitOutOfMemory:
      return "oom";
    case kExitDataError:
      return "data_error";
    default:
      return "crashed";
  }
}

}  // namespace xv::trainer
