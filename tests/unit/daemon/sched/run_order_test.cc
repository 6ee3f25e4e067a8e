// The run order of a round (daemon/sched/run_order.h): randomised blocks, each holding one run of
// every arm, reproducible from the recorded seed.
#include "daemon/sched/run_order.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace xv::sched {
namespace {

std::vector<ArmRuns> Arms(int candidates, int replicates, int controls) {
  std::vector<ArmRuns> arms;
  for (int c = 0; c < candidates; ++c) arms.push_back({"c" + std::to_string(c), replicates});
  arms.push_back({"head", controls});
  return arms;
}

TEST(RunOrderTest, EveryBlockHoldsEveryArmOnceWhenTheCountsAreEqual) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    const std::vector<ArmRuns> arms = Arms(3, 4, 4);
    const std::vector<RunSlot> order = PlanRunOrder(arms, seed);
    ASSERT_EQ(order.size(), 16u);
    std::map<int, std::multiset<size_t>> blocks;
    for (size_t i = 0; i < order.size(); ++i) {
      EXPECT_EQ(order[i].position, static_cast<int>(i));
      EXPECT_EQ(order[i].run, order[i].block) << "an arm's runs go out in their own order";
      blocks[order[i].block].insert(order[i].arm_index);
      if (i > 0) EXPECT_GE(order[i].block, order[i - 1].block) << "blocks are contiguous";
    }
    ASSERT_EQ(blocks.size(), 4u);
    for (const auto& [block, members] : blocks) {
      EXPECT_EQ(members, (std::multiset<size_t>{0, 1, 2, 3}))
          << "seed " << seed << " block " << block;
    }
  }
}

TEST(RunOrderTest, UnequalCountsPutEachArmAtMostOncePerBlockSpreadOverTheBlocks) {
  // noise_band's shape: single candidate runs, 5 controls. The controls fill every block; each
  // candidate's run lands in a random block, not always the first.
  const std::vector<ArmRuns> arms = {{"a", 1}, {"b", 2}, {"head", 5}};
  std::map<int, int> a_block;
  for (uint64_t seed = 1; seed <= 500; ++seed) {
    const std::vector<RunSlot> order = PlanRunOrder(arms, seed);
    ASSERT_EQ(order.size(), 8u);
    std::map<int, std::multiset<size_t>> blocks;
    std::map<size_t, std::vector<int>> runs;
    for (const RunSlot& s : order) {
      blocks[s.block].insert(s.arm_index);
      runs[s.arm_index].push_back(s.run);
      if (s.arm_index == 0) ++a_block[s.block];
    }
    ASSERT_EQ(blocks.size(), 5u);
    for (const auto& [block, members] : blocks) {
      EXPECT_EQ(members.count(2), 1u) << "the controls are in every block";
      EXPECT_LE(members.count(0), 1u);
      EXPECT_LE(members.count(1), 1u);
    }
    EXPECT_EQ(runs[0], (std::vector<int>{0}));
    EXPECT_EQ(runs[1], (std::vector<int>{0, 1}));
    EXPECT_EQ(runs[2], (std::vector<int>{0, 1, 2, 3, 4}));
  }
  for (int b = 0; b < 5; ++b) EXPECT_NEAR(a_block[b], 100, 40) << "block " << b;
}

TEST(RunOrderTest, TheSeedReproducesTheOrderAndDifferentSeedsShuffle) {
  const std::vector<ArmRuns> arms = Arms(5, 4, 4);
  auto flat = [&](uint64_t seed) {
    std::vector<size_t> out;
    for (const RunSlot& s : PlanRunOrder(arms, seed)) out.push_back(s.arm_index);
    return out;
  };
  EXPECT_EQ(flat(12345), flat(12345));
  std::set<std::vector<size_t>> distinct;
  for (uint64_t seed = 1; seed <= 50; ++seed) distinct.insert(flat(seed));
  EXPECT_GT(distinct.size(), 45u) << "50 seeds should give (almost) 50 orders";
}

TEST(RunOrderTest, NoArmHoldsTheEarlyOrTheLateSlotsOfABlock) {
  // Over many seeds every arm takes each place within a block about equally often.
  const std::vector<ArmRuns> arms = Arms(3, 1, 1);  // one block of 4
  std::map<size_t, std::map<int, int>> place;
  const int seeds = 4000;
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    for (const RunSlot& s : PlanRunOrder(arms, seed)) ++place[s.arm_index][s.position];
  }
  for (const auto& [arm, counts] : place) {
    for (int p = 0; p < 4; ++p) {
      EXPECT_NEAR(counts.at(p), seeds / 4, 150) << "arm " << arm << " at place " << p;
    }
  }
}

TEST(RunOrderTest, NoArmsNoSlotsAndNewSeedsAreExactInJson) {
  EXPECT_TRUE(PlanRunOrder({}, 1).empty());
  EXPECT_TRUE(PlanRunOrder({{"a", 0}}, 1).empty());
  for (int i = 0; i < 100; ++i) {
    const uint64_t seed = NewOrderSeed();
    EXPECT_GE(seed, 1u);
    EXPECT_LT(seed, uint64_t{1} << 53);
  }
}

}  // namespace
}  // namespace xv::sched
