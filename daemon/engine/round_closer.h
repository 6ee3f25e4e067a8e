// RoundCloser: turns finished rounds into keep/discard decisions (DESIGN.md § Keep/discard
// semantics). For each open round of a campaign with a policy whose experiments are all terminal
// it loads the round's runs from the store, has the pure sched::DecideRound
// (daemon/sched/round_verdict.h) decide, and stores the verdict as it is (round summary + JSON
// statistics, each candidate experiment's decision and reason, the new head).
//
// Input mapping: control runs (role control) and, when the policy pools head runs, earlier
// succeeded/diverged runs of the same head config in the campaign are the head runs; a run and
// the reuse rows that copy it count once (a confirm round summarises its own controls alone).
// Candidates are grouped by name in submission order. succeeded -> a run with its val_bpb (NaN when
// the result has none), diverged -> a diverged run, any other terminal state -> no run. The kept
// candidate's first experiment (lowest replicate) gives the new head recipe. Issue 14: the round's
// own runs (not reuse rows) with their tok/s, steps and start times are the verdict's drift runs;
// candidates whose overrides hold a step-work knob (sched/step_work_knobs.h) are marked so; the
// drift figures are stored in rounds.drift_json beside the decision.
//
// Thread-safety: the store serialises writes; StoreRoundDecision refuses a round that is no longer
// open, so concurrent closers (the daemon loop and a Decide call) cannot decide a round twice.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "common/status.h"
#include "daemon/engine/campaign_policy.h"
#include "daemon/sched/round_verdict.h"
#include "daemon/store/store.h"

namespace xv::daemon {

class RoundCloser {
 public:
  // `store` must outlive the closer.
  explicit RoundCloser(store::Store* store) : store_(store) {}

  // Decides every ready round of a campaign whose policy says decide: auto. *decided (may be
  // null) receives how many rounds were decided.
  Status DecideReadyRounds(int* decided);

  // Decides one round now (policy decide: auto) when it is ready; FailedPrecondition otherwise.
  Status DecideRound(int64_t round_id);

  // The Decide RPC: keeps the candidate of `keep_experiment_id` (0: none) with `reason`.
  // FailedPrecondition when the campaign's policy is automatic, the round is not open or some of
  // its experiments are unfinished; InvalidArgument when the experiment is not a finished
  // candidate of the round.
  Status DecideManually(int64_t round_id, int64_t keep_experiment_id, const std::string& reason);

 private:
  // A round as the verdict sees it, and per candidate its lowest-replicate experiment (whose recipe
  // becomes the head when the candidate is kept).
  struct LoadedRound {
    sched::RoundInput input;
    std::map<std::string, int64_t> first_experiment;
  };

  // Load, decide, store.
  Status Decide(const store::RoundToDecide& round);
  Status LoadRound(const store::RoundToDecide& round, const CampaignPolicy& policy,
                   LoadedRound* out);
  Status StoreVerdict(int64_t round_id, const sched::RoundVerdict& verdict,
                      const std::map<std::string, int64_t>& first_experiment);

  store::Store* const store_;
};

}  // namespace xv::daemon
