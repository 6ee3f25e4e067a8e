// Placement: which queued experiments go to which idle workers. Pure functions over snapshots, so
// the policy is unit-tested without a database or a network.
//
// Policy (issue 2; issue 5 deepens it):
//  - order: the queue as given (highest priority first, then FIFO by id); an experiment that no
//  free
//    worker can take is skipped, never blocking the ones behind it;
//  - eligibility: the worker's trainer list contains the experiment's trainer (an empty list means
//    {"libtorch"}), the campaign's device filter (comma-separated terms; the worker matches when
//    one term is a case-insensitive substring of its device_text; "" matches all) accepts the
//    worker, and an experiment that requires a GPU (recipe device "cuda") goes only to a GPU
//    worker; cpu/auto recipes run anywhere; a code candidate (issue 16) goes only to a worker
//    whose code_candidate_trainers lists its trainer;
//  - spreading: among eligible workers, the one that has run the fewest attempts of the same
//  candidate
//    (round + candidate name, so replicates land on different devices), then the one with the most
//    free slots, then the lowest worker id;
//  - per-campaign concurrency (issue 5): a campaign whose budget contract sets max_concurrent
//    gets at most its remaining slots (limit minus its assigned/running attempts) in one pass;
//    its queued experiments beyond that are skipped, and other campaigns' work behind them is
//    still placed (no GPU idles while other work is queued).
// Thread-safety: stateless.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "daemon/sched/placement_inputs.h"

namespace xv::sched {

// A connected worker that can take work now.
struct WorkerSlot {
  int64_t worker_id = 0;
  std::vector<std::string> trainers;  // configured trainer plugin names
  // Trainers that run code candidates (Capabilities.code_candidate_trainers; issue 16).
  std::vector<std::string> code_candidate_trainers;
  bool has_gpu = false;     // backend cuda or rocm
  std::string device_text;  // "backend vendor name", lower case
  int free_slots = 1;       // max_concurrent minus the attempts it holds
};

struct Placement {
  int64_t experiment_id = 0;
  int64_t worker_id = 0;
};

// The device-filter rule above.
bool DeviceFilterAccepts(const std::string& filter, const std::string& device_text);

// True when `worker` may run `experiment` (trainer and device rules above).
bool WorkerCanRun(const WorkerSlot& worker, const QueuedExperiment& experiment);

// Plans assignments for `queued` over `workers`; `history` counts earlier attempts per candidate
// and worker. Each worker receives at most its free_slots experiments. `campaign_free_slots` maps
// a limited campaign's id to how many more of its experiments may be assigned now (<= 0: none);
// a campaign absent from it has no limit.
std::vector<Placement> PlanPlacements(const std::vector<QueuedExperiment>& queued,
                                      std::vector<WorkerSlot> workers,
                                      const std::vector<CandidateWorkerCount>& history,
                                      std::map<int64_t, int> campaign_free_slots = {});

}  // namespace xv::sched
