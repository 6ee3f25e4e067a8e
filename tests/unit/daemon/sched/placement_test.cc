// Tests of the placement policy (daemon/sched/placement.h).
#include <gtest/gtest.h>

#include <map>

#include "daemon/sched/placement.h"

namespace xv::sched {
namespace {

sched::QueuedExperiment Q(int64_t id, std::string candidate = "c", int64_t round = 1,
                          std::string trainer = "libtorch", std::string device = "any",
                          int priority = 0) {
  sched::QueuedExperiment q;
  q.id = id;
  q.candidate = std::move(candidate);
  q.round_id = round;
  q.trainer = std::move(trainer);
  q.device_requirement = std::move(device);
  q.priority = priority;
  return q;
}

WorkerSlot W(int64_t id, bool gpu = false, std::vector<std::string> trainers = {"libtorch"},
             int slots = 1) {
  WorkerSlot w;
  w.worker_id = id;
  w.has_gpu = gpu;
  w.trainers = std::move(trainers);
  w.free_slots = slots;
  return w;
}

std::map<int64_t, int64_t> ByExperiment(const std::vector<Placement>& ps) {
  std::map<int64_t, int64_t> m;
  for (const auto& p : ps) m[p.experiment_id] = p.worker_id;
  return m;
}

TEST(Placement, FifoInQueueOrderOneExperimentPerFreeSlot) {
  auto ps = PlanPlacements({Q(1), Q(2), Q(3)}, {W(10), W(11)}, {});
  ASSERT_EQ(ps.size(), 2u);
  EXPECT_EQ(ps[0].experiment_id, 1);
  EXPECT_EQ(ps[1].experiment_id, 2);
  EXPECT_NE(ps[0].worker_id, ps[1].worker_id);
}

TEST(Placement, GpuRecipesOnlyOnGpuWorkersCpuRecipesAnywhere) {
  // Experiment 1 needs a GPU; the only worker is a CPU worker: 1 is skipped, 2 still runs.
  auto m = ByExperiment(PlanPlacements({Q(1, "a", 1, "libtorch", "gpu"), Q(2)}, {W(10)}, {}));
  EXPECT_EQ(m.count(1), 0u);
  EXPECT_EQ(m[2], 10);
  // A cpu/auto recipe may run on a GPU worker.
  m = ByExperiment(PlanPlacements({Q(3)}, {W(20, /*gpu=*/true)}, {}));
  EXPECT_EQ(m[3], 20);
  m = ByExperiment(PlanPlacements({Q(4, "a", 1, "libtorch", "gpu")}, {W(10), W(20, true)}, {}));
  EXPECT_EQ(m[4], 20);
}

TEST(Placement, TrainerMustBeConfiguredOnTheWorker) {
  auto m = ByExperiment(
      PlanPlacements({Q(1, "a", 1, "upstream-fork"), Q(2, "b", 1, "libtorch")},
                     {W(10, false, {"libtorch"}), W(11, false, {"upstream-fork"})}, {}));
  EXPECT_EQ(m[1], 11);
  EXPECT_EQ(m[2], 10);
  // An empty trainer list means the default trainer only.
  EXPECT_TRUE(WorkerCanRun(W(1, false, {}), Q(1)));
  EXPECT_FALSE(WorkerCanRun(W(1, false, {}), Q(1, "a", 1, "upstream-fork")));
  EXPECT_TRUE(PlanPlacements({Q(1, "a", 1, "other")}, {W(10)}, {}).empty());
}

TEST(Placement, ReplicatesSpreadOverWorkersThatHaveNotRunTheCandidate) {
  // Worker 10 already ran candidate "lr" of round 7 twice, worker 11 once, worker 12 never.
  std::vector<sched::CandidateWorkerCount> history = {{7, "lr", 10, 2}, {7, "lr", 11, 1}};
  auto ps = PlanPlacements({Q(1, "lr", 7)}, {W(10), W(11), W(12)}, history);
  ASSERT_EQ(ps.size(), 1u);
  EXPECT_EQ(ps[0].worker_id, 12);
  // Within one pass, the replicates of one candidate go to different workers even when one worker
  // has several slots.
  ps = PlanPlacements({Q(1, "lr", 7), Q(2, "lr", 7)}, {W(10, false, {"libtorch"}, 2), W(11)}, {});
  ASSERT_EQ(ps.size(), 2u);
  EXPECT_NE(ps[0].worker_id, ps[1].worker_id);
  // History of another round does not count.
  ps = PlanPlacements({Q(1, "lr", 8)}, {W(10), W(11)}, history);
  EXPECT_EQ(ps[0].worker_id, 10);
}

TEST(Placement, CampaignAtItsConcurrencyLimitIsSkippedWithoutBlockingOthers) {
  // Campaign 1 (limit: 1 more slot) has experiments 1..4 first in the queue; campaign 2 (no
  // limit) has 5 and 6 behind them. Three idle workers: one goes to campaign 1, two to 2.
  std::vector<sched::QueuedExperiment> queued;
  for (int64_t id = 1; id <= 6; ++id) {
    queued.push_back(Q(id, "c" + std::to_string(id)));
    queued.back().campaign_id = id <= 4 ? 1 : 2;
  }
  auto m = ByExperiment(PlanPlacements(queued, {W(10), W(11), W(12)}, {}, {{1, 1}}));
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m.count(1), 1u);  // the first of campaign 1 in queue order
  EXPECT_EQ(m.count(2) + m.count(3) + m.count(4), 0u);
  EXPECT_EQ(m.count(5), 1u);
  EXPECT_EQ(m.count(6), 1u);

  // At the limit already (0 or fewer slots left): none of campaign 1, all of campaign 2.
  m = ByExperiment(PlanPlacements(queued, {W(10), W(11), W(12)}, {}, {{1, 0}}));
  EXPECT_EQ(m.size(), 2u);
  EXPECT_EQ(m.count(5) + m.count(6), 2u);
  m = ByExperiment(PlanPlacements(queued, {W(10), W(11), W(12)}, {}, {{1, -2}}));
  EXPECT_EQ(m.size(), 2u);

  // A limit of 2 with two slots on one worker: two of campaign 1, never a third.
  m = ByExperiment(
      PlanPlacements(queued, {W(10, false, {"libtorch"}, 4), W(11)}, {}, {{1, 2}, {2, 1}}));
  EXPECT_EQ(m.count(1) + m.count(2), 2u);
  EXPECT_EQ(m.count(3) + m.count(4), 0u);
  EXPECT_EQ(m.count(5), 1u);  // campaign 2 limited to one as well
  EXPECT_EQ(m.count(6), 0u);

  // No entry: no limit.
  EXPECT_EQ(PlanPlacements(queued, {W(10), W(11), W(12)}, {}).size(), 3u);
  EXPECT_EQ(ByExperiment(PlanPlacements(queued, {W(10), W(11), W(12)}, {})).count(3), 1u);
}

TEST(Placement, WorkersWithoutFreeSlotsGetNothing) {
  EXPECT_TRUE(PlanPlacements({Q(1)}, {W(10, false, {"libtorch"}, 0)}, {}).empty());
  auto ps = PlanPlacements({Q(1), Q(2), Q(3)}, {W(10, false, {"libtorch"}, 2)}, {});
  EXPECT_EQ(ps.size(), 2u);
}

}  // namespace
}  // namespace xv::sched

namespace xv::sched {
namespace {

TEST(DeviceFilter, TermsMatchCaseInsensitiveSubstringsOfTheWorkerDevice) {
  EXPECT_TRUE(DeviceFilterAccepts("", "cuda nvidia nvidia h200"));
  EXPECT_TRUE(DeviceFilterAccepts(" , ", "cpu cpu cpu: fake"));
  EXPECT_TRUE(DeviceFilterAccepts("H200", "cuda nvidia nvidia h200"));
  EXPECT_TRUE(DeviceFilterAccepts("rocm, h200", "cuda nvidia nvidia h200"));
  EXPECT_FALSE(DeviceFilterAccepts("rocm", "cuda nvidia nvidia h200"));
  EXPECT_FALSE(DeviceFilterAccepts("cuda,rocm", "cpu cpu cpu: fake"));
}

TEST(DeviceFilter, PlacementSkipsWorkersOutsideTheCampaignFilter) {
  sched::QueuedExperiment gpu_only;
  gpu_only.id = 1;
  gpu_only.candidate = "c";
  gpu_only.device_filter = "mi300";
  sched::QueuedExperiment any;
  any.id = 2;
  any.candidate = "d";
  WorkerSlot cpu;
  cpu.worker_id = 7;
  cpu.trainers = {"libtorch"};
  cpu.device_text = "cpu cpu cpu: fake";
  std::vector<Placement> plan = PlanPlacements({gpu_only, any}, {cpu}, {});
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].experiment_id, 2);
  EXPECT_EQ(plan[0].worker_id, 7);
}

}  // namespace
}  // namespace xv::sched
