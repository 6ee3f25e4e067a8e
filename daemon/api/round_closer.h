// RoundCloser: turns finished rounds into keep/discard decisions (DESIGN.md § Keep/discard
// semantics). For each open round of a campaign with a policy whose experiments are all terminal,
// it builds the RoundDecider's input from the store, decides, and stores the decision (round
// summary + JSON statistics, each candidate experiment's decision and reason, the new head).
//
// Input mapping: control runs (role control) and, when the policy pools head runs, earlier
// succeeded/diverged runs of the same head config in the campaign are the head runs; a run and
// the reuse rows that copy it count once. Candidates are grouped by name in submission order.
// succeeded -> a run with its val_bpb (NaN when the result has none), diverged -> a diverged run,
// any other terminal state -> no run. The kept candidate's first experiment (lowest replicate)
// gives the new head recipe.
//
// Thread-safety: the store serialises writes; StoreRoundDecision refuses a round that is no longer
// open, so concurrent closers (the monitor thread and a Decide call) cannot decide a round twice.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
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
  Status Decide(const store::RoundToDecide& round);

  store::Store* const store_;
};

}  // namespace xv::daemon
