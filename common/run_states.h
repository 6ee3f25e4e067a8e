// The typed states, kinds and roles of xv's records: experiments, rounds, campaigns, plans and
// workers. Code compares these enums; their names (the strings below) appear only where a value
// crosses an edge: a SQL row (migrations/*.sql CHECK constraints list the same names), a proto
// field, a JSON document, a CLI flag. `switch` over them has no `default`, so that the compiler
// names a case a new value leaves out.
//
// For every enum E here: `ToString(E)` gives its name ("" for a value outside the enum), and
// `Parse<Name>(text, &out)` is true when `text` is exactly one of the names.
// Thread-safety: pure functions over constant data.
#pragma once

#include <string>
#include <string_view>

namespace xv {

// An experiment's life: queued -> assigned -> running -> one of the terminal states. An attempt
// that loses its worker may send the experiment back to queued (attempt + 1).
enum class ExperimentState {
  kQueued,
  kAssigned,
  kRunning,
  kSucceeded,  // the trainer ran to the end and reported val_bpb
  kDiverged,   // the loss went NaN or exploded (a result: the recipe is bad)
  kFailed,     // the trainer failed (crash, bad data, out of memory...)
  kInvalid,    // the trainer reported figures that cannot be true (sched/result_plausibility.h)
  kCancelled,
  kTimedOut,  // the hard deadline passed
  kLost,      // its worker vanished and no attempt is left
};
std::string_view ToString(ExperimentState state);
bool ParseExperimentState(std::string_view text, ExperimentState* out);
// Every state but queued, assigned and running.
bool IsTerminal(ExperimentState state);
// Assigned or running: a worker holds the attempt.
bool IsActive(ExperimentState state);
// Succeeded or diverged: the run measured the recipe (the statistics use these).
bool IsFinishedRun(ExperimentState state);

// What built a round (rounds.kind).
enum class RoundKind { kCandidates, kSweep, kAblation, kConfirm, kPlanPhase };
std::string_view ToString(RoundKind kind);
bool ParseRoundKind(std::string_view text, RoundKind* out);

// rounds.state.
enum class RoundState { kOpen, kDecided, kCancelled };
std::string_view ToString(RoundState state);
bool ParseRoundState(std::string_view text, RoundState* out);

// campaigns.state.
enum class CampaignState { kActive, kPaused, kDone };
std::string_view ToString(CampaignState state);
bool ParseCampaignState(std::string_view text, CampaignState* out);

// experiments.role: a candidate of the round, or a control run of the round's head config.
enum class RunRole { kCandidate, kControl };
std::string_view ToString(RunRole role);
bool ParseRunRole(std::string_view text, RunRole* out);

// rounds.keep_rule: keep the best candidate that passes the policy, or only record (plans' failure
// maps).
enum class KeepRule { kBest, kNone };
std::string_view ToString(KeepRule rule);
bool ParseKeepRule(std::string_view text, KeepRule* out);

// experiments.decision: what the round decided about a candidate's experiments.
enum class Decision { kPending, kKeep, kDiscard };
std::string_view ToString(Decision decision);
bool ParseDecision(std::string_view text, Decision* out);

// plans.state.
enum class PlanState { kRunning, kPaused, kDone, kFailed, kCancelled };
std::string_view ToString(PlanState state);
bool ParsePlanState(std::string_view text, PlanState* out);

// workers.state (drained is shown to clients for a draining worker with nothing left to run).
enum class WorkerState { kIdle, kBusy, kDraining, kOffline };
std::string_view ToString(WorkerState state);
bool ParseWorkerState(std::string_view text, WorkerState* out);

}  // namespace xv
