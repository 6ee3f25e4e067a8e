// What placement (daemon/sched/placement.h) reads about the queue and the replicates' history:
// plain rows the caller fills (the store's ExperimentQueries does), so that placement depends on
// no store header.
// Thread-safety: plain values; no shared state.
#pragma once

#include <cstdint>
#include <string>

namespace xv::sched {

// A queued experiment as the scheduler sees it.
struct QueuedExperiment {
  int64_t id = 0;
  int priority = 0;
  std::string trainer;
  std::string device_requirement;  // any | gpu
  int64_t round_id = 0;
  std::string candidate;      // candidate name within the round (replicates share it)
  std::string device_filter;  // the campaign's ("" = any device)
  int64_t campaign_id = 0;
  std::string campaign_budget_json;  // campaigns.budget_json (max_concurrent: placement limit)
  bool code_candidate = false;       // runs a submitted source: only workers allowing it (issue 16)
};

// Attempts of one candidate (round + name) per worker, for spreading replicates.
struct CandidateWorkerCount {
  int64_t round_id = 0;
  std::string candidate;
  int64_t worker_id = 0;
  int count = 0;
};

}  // namespace xv::sched
