#include "worker/exit_classification.h"

#include "common/run_states.h"

#include <signal.h>

#include <cstdio>

namespace xv::worker {
namespace {

// The wire name of a state (Finished.state).
std::string StateName(ExperimentState state) { return std::string(ToString(state)); }

}  // namespace

std::string SignalName(int sig) {
  switch (sig) {
    case SIGHUP:
      return "SIGHUP";
    case SIGINT:
      return "SIGINT";
    case SIGQUIT:
      return "SIGQUIT";
    case SIGILL:
      return "SIGILL";
    case SIGTRAP:
      return "SIGTRAP";
    case SIGABRT:
      return "SIGABRT";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGKILL:
      return "SIGKILL";
    case SIGSEGV:
      return "SIGSEGV";
    case SIGPIPE:
      return "SIGPIPE";
    case SIGALRM:
      return "SIGALRM";
    case SIGTERM:
      return "SIGTERM";
    case SIGXCPU:
      return "SIGXCPU";
    case SIGXFSZ:
      return "SIGXFSZ";
    default:
      return "signal " + std::to_string(sig);
  }
}

AttemptOutcome ClassifyExit(const ExitStatus& exit, KillReason reason, double deadline_s,
                            const std::string& error_message) {
  AttemptOutcome out;
  auto detail = [&](const std::string& fallback) {
    return error_message.empty() ? fallback : error_message;
  };
  if (reason == KillReason::kDeadline) {
    char buf[96];
    std::snprintf(buf, sizeof(buf), "killed at the hard deadline of %.0f s", deadline_s);
    return {StateName(ExperimentState::kTimedOut), "timed_out", buf};
  }
  if (reason == KillReason::kCancel)
    return {StateName(ExperimentState::kCancelled), "cancelled", "cancelled by the daemon"};
  if (!exit.exited) {
    return {StateName(ExperimentState::kFailed), "crashed",
            "killed by " + SignalName(exit.term_signal)};
  }
  switch (exit.exit_code) {
    case 0:
      return {StateName(ExperimentState::kSucceeded), "", ""};
    case 2:
      return {StateName(ExperimentState::kInvalid), "invalid_config",
              detail("exit code 2 (invalid config)")};
    case 3:
      return {StateName(ExperimentState::kDiverged), "diverged", detail("exit code 3 (diverged)")};
    case 4:
      return {StateName(ExperimentState::kFailed), "oom", detail("exit code 4 (out of memory)")};
    case 5:
      return {StateName(ExperimentState::kFailed), "data_error",
              detail("exit code 5 (data error)")};
    default: {
      std::string code = "exit code " + std::to_string(exit.exit_code);
      return {StateName(ExperimentState::kFailed), "crashed",
              error_message.empty() ? code : error_message + " (" + code + ")"};
    }
  }
}

}  // namespace xv::worker
