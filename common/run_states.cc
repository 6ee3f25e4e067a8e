#include "common/run_states.h"

namespace xv {
namespace {

// Parses by asking ToString for each value from 0 until it answers "" (past the last one).
template <typename Enum>
bool ParseByName(std::string_view text, Enum* out) {
  for (int i = 0;; ++i) {
    std::string_view name = ToString(static_cast<Enum>(i));
    if (name.empty()) return false;
    if (name == text) {
      *out = static_cast<Enum>(i);
      return true;
    }
  }
}

}  // namespace

std::string_view ToString(ExperimentState state) {
  switch (state) {
    case ExperimentState::kQueued:
      return "queued";
    case ExperimentState::kAssigned:
      return "assigned";
    case ExperimentState::kRunning:
      return "running";
    case ExperimentState::kSucceeded:
      return "succeeded";
    case ExperimentState::kDiverged:
      return "diverged";
    case ExperimentState::kFailed:
      return "failed";
    case ExperimentState::kInvalid:
      return "invalid";
    case ExperimentState::kCancelled:
      return "cancelled";
    case ExperimentState::kTimedOut:
      return "timed_out";
    case ExperimentState::kLost:
      return "lost";
  }
  return "";
}
bool ParseExperimentState(std::string_view text, ExperimentState* out) {
  return ParseByName(text, out);
}

bool IsTerminal(ExperimentState state) {
  switch (state) {
    case ExperimentState::kQueued:
    case ExperimentState::kAssigned:
    case ExperimentState::kRunning:
      return false;
    case ExperimentState::kSucceeded:
    case ExperimentState::kDiverged:
    case ExperimentState::kFailed:
    case ExperimentState::kInvalid:
    case ExperimentState::kCancelled:
    case ExperimentState::kTimedOut:
    case ExperimentState::kLost:
      return true;
  }
  return false;
}

bool IsActive(ExperimentState state) {
  return state == ExperimentState::kAssigned || state == ExperimentState::kRunning;
}

bool IsFinishedRun(ExperimentState state) {
  return state == ExperimentState::kSucceeded || state == ExperimentState::kDiverged;
}

std::string_view ToString(RoundKind kind) {
  switch (kind) {
    case RoundKind::kCandidates:
      return "candidates";
    case RoundKind::kSweep:
      return "sweep";
    case RoundKind::kAblation:
      return "ablation";
    case RoundKind::kConfirm:
      return "confirm";
    case RoundKind::kPlanPhase:
      return "plan-phase";
  }
  return "";
}
bool ParseRoundKind(std::string_view text, RoundKind* out) { return ParseByName(text, out); }

std::string_view ToString(RoundState state) {
  switch (state) {
    case RoundState::kOpen:
      return "open";
    case RoundState::kDecided:
      return "decided";
    case RoundState::kCancelled:
      return "cancelled";
  }
  return "";
}
bool ParseRoundState(std::string_view text, RoundState* out) { return ParseByName(text, out); }

std::string_view ToString(CampaignState state) {
  switch (state) {
    case CampaignState::kActive:
      return "active";
    case CampaignState::kPaused:
      return "paused";
    case CampaignState::kDone:
      return "done";
  }
  return "";
}
bool ParseCampaignState(std::string_view text, CampaignState* out) {
  return ParseByName(text, out);
}

std::string_view ToString(RunRole role) {
  switch (role) {
    case RunRole::kCandidate:
      return "candidate";
    case RunRole::kControl:
      return "control";
  }
  return "";
}
bool ParseRunRole(std::string_view text, RunRole* out) { return ParseByName(text, out); }

std::string_view ToString(KeepRule rule) {
  switch (rule) {
    case KeepRule::kBest:
      return "best";
    case KeepRule::kNone:
      return "none";
  }
  return "";
}
bool ParseKeepRule(std::string_view text, KeepRule* out) { return ParseByName(text, out); }

std::string_view ToString(Decision decision) {
  switch (decision) {
    case Decision::kPending:
      return "pending";
    case Decision::kKeep:
      return "keep";
    case Decision::kDiscard:
      return "discard";
  }
  return "";
}
bool ParseDecision(std::string_view text, Decision* out) { return ParseByName(text, out); }

std::string_view ToString(PlanState state) {
  switch (state) {
    case PlanState::kRunning:
      return "running";
    case PlanState::kPaused:
      return "paused";
    case PlanState::kDone:
      return "done";
    case PlanState::kFailed:
      return "failed";
    case PlanState::kCancelled:
      return "cancelled";
  }
  return "";
}
bool ParsePlanState(std::string_view text, PlanState* out) { return ParseByName(text, out); }

std::string_view ToString(WorkerState state) {
  switch (state) {
    case WorkerState::kIdle:
      return "idle";
    case WorkerState::kBusy:
      return "busy";
    case WorkerState::kDraining:
      return "draining";
    case WorkerState::kOffline:
      return "offline";
  }
  return "";
}
bool ParseWorkerState(std::string_view text, WorkerState* out) { return ParseByName(text, out); }

}  // namespace xv
