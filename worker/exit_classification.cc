#include "worker/exit_classification.h"

#include <signal.h>

#include <cstdio>

namespace xv::worker {

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
    return {"timed_out", "timed_out", buf};
  }
  if (reason == KillReason::kCancel) return {"cancelled", "cancelled", "cancelled by the daemon"};
  if (!exit.exited) {
    return {"failed", "crashed", "killed by " + SignalName(exit.term_signal)};
  }
  switch (exit.exit_code) {
    case 0:
      return {"succeeded", "", ""};
    case 2:
      return {"invalid", "invalid_config", detail("exit code 2 (invalid config)")};
    case 3:
      return {"diverged", "diverged", detail("exit code 3 (diverged)")};
    case 4:
      return {"failed", "oom", detail("exit code 4 (out of memory)")};
    case 5:
      return {"failed", "data_error", detail("exit code 5 (data error)")};
    default: {
      std::string code = "exit code " + std::to_string(exit.exit_code);
      return {"failed", "crashed",
              error_message.empty() ? code : error_message + " (" + code + ")"};
    }
  }
}

}  // namespace xv::worker
