#include "daemon/sched/run_order.h"

#include <algorithm>
#include <random>
#include <utility>

namespace xv::sched {
namespace {

// SplitMix64 (Steele, Lea, Flood 2014): small, fast and the same on every platform.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) for n >= 1 (rejection sampling: no modulo bias).
  uint64_t Below(uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t v = Next();
    while (v >= limit) v = Next();
    return v % n;
  }

 private:
  uint64_t state_;
};

}  // namespace

std::vector<RunSlot> PlanRunOrder(const std::vector<ArmRuns>& arms, uint64_t seed) {
  SplitMix64 random(seed);
  int blocks = 0;
  for (const ArmRuns& a : arms) blocks = std::max(blocks, a.runs);
  // Which blocks each arm has a run in: all of them for the arms with the most runs, a random
  // subset of `runs` blocks for the others (so that a short arm is not all early).
  std::vector<std::vector<bool>> in_block(arms.size(), std::vector<bool>(blocks, false));
  for (size_t i = 0; i < arms.size(); ++i) {
    std::vector<int> chosen(blocks);
    for (int b = 0; b < blocks; ++b) chosen[b] = b;
    const int runs = std::max(0, arms[i].runs);
    for (int k = 0; k < runs && runs < blocks; ++k) {  // partial Fisher-Yates: the first `runs`
      std::swap(chosen[k], chosen[k + random.Below(blocks - k)]);
    }
    for (int k = 0; k < runs; ++k) in_block[i][chosen[k]] = true;
  }
  std::vector<int> next_run(arms.size(), 0);
  std::vector<RunSlot> order;
  for (int b = 0; b < blocks; ++b) {
    std::vector<size_t> members;
    for (size_t i = 0; i < arms.size(); ++i) {
      if (in_block[i][b]) members.push_back(i);
    }
    // Fisher-Yates, from the back.
    for (size_t i = members.size(); i > 1; --i) {
      std::swap(members[i - 1], members[random.Below(i)]);
    }
    for (size_t arm : members) {
      RunSlot slot;
      slot.position = static_cast<int>(order.size());
      slot.block = b;
      slot.arm_index = arm;
      slot.run = next_run[arm]++;
      order.push_back(slot);
    }
  }
  return order;
}

uint64_t NewOrderSeed() {
  std::random_device device;
  const uint64_t bits = (static_cast<uint64_t>(device()) << 32) ^ device();
  return 1 + bits % ((uint64_t{1} << 53) - 1);
}

}  // namespace xv::sched
