#include "daemon/sched/placement.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <tuple>

namespace xv::sched {

bool DeviceFilterAccepts(const std::string& filter, const std::string& device_text) {
  bool any_term = false;
  size_t start = 0;
  while (start <= filter.size()) {
    size_t end = filter.find(',', start);
    if (end == std::string::npos) end = filter.size();
    std::string term = filter.substr(start, end - start);
    term.erase(0, term.find_first_not_of(' '));
    term.erase(term.find_last_not_of(' ') + 1);
    for (char& c : term) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (!term.empty()) {
      any_term = true;
      if (device_text.find(term) != std::string::npos) return true;
    }
    start = end + 1;
  }
  return !any_term;
}

bool WorkerCanRun(const WorkerSlot& worker, const QueuedExperiment& experiment) {
  const std::string trainer = experiment.trainer.empty() ? "libtorch" : experiment.trainer;
  bool trainer_ok = worker.trainers.empty()
                        ? trainer == "libtorch"
                        : std::find(worker.trainers.begin(), worker.trainers.end(), trainer) !=
                              worker.trainers.end();
  if (!trainer_ok) return false;
  // A code candidate runs only where its trainer's config allows code candidates (sandboxed).
  if (experiment.code_candidate &&
      std::find(worker.code_candidate_trainers.begin(), worker.code_candidate_trainers.end(),
                trainer) == worker.code_candidate_trainers.end()) {
    return false;
  }
  if (experiment.device_requirement == "gpu" && !worker.has_gpu) return false;
  if (!DeviceFilterAccepts(experiment.device_filter, worker.device_text)) return false;
  return true;
}

std::vector<Placement> PlanPlacements(const std::vector<QueuedExperiment>& queued,
                                      std::vector<WorkerSlot> workers,
                                      const std::vector<CandidateWorkerCount>& history,
                                      std::map<int64_t, int> campaign_free_slots) {
  using Key = std::tuple<int64_t, std::string, int64_t>;  // round, candidate, worker
  std::map<Key, int> counts;
  for (const auto& h : history) counts[{h.round_id, h.candidate, h.worker_id}] += h.count;

  std::vector<Placement> out;
  for (const QueuedExperiment& e : queued) {
    auto limit = campaign_free_slots.find(e.campaign_id);
    if (limit != campaign_free_slots.end() && limit->second <= 0) continue;
    WorkerSlot* best = nullptr;
    int best_count = 0;
    for (WorkerSlot& w : workers) {
      if (w.free_slots <= 0 || !WorkerCanRun(w, e)) continue;
      int count = 0;
      auto it = counts.find({e.round_id, e.candidate, w.worker_id});
      if (it != counts.end()) count = it->second;
      bool better = best == nullptr || count < best_count ||
                    (count == best_count && w.free_slots > best->free_slots) ||
                    (count == best_count && w.free_slots == best->free_slots &&
                     w.worker_id < best->worker_id);
      if (better) {
        best = &w;
        best_count = count;
      }
    }
    if (best == nullptr) continue;
    out.push_back({e.id, best->worker_id});
    --best->free_slots;
    if (limit != campaign_free_slots.end()) --limit->second;
    ++counts[{e.round_id, e.candidate, best->worker_id}];
  }
  return out;
}

}  // namespace xv::sched
