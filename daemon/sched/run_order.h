// RunOrder: the order in which a round's runs are dispatched (issue 14). A round has arms (its head
// controls and each candidate); their runs go out in randomised blocks, as many blocks as the
// largest arm has runs: every block holds one run of each arm with that many runs, an arm with
// fewer runs has one in each of a random subset of the blocks, and each block's order is shuffled,
// all with a seed recorded on the round. So no arm gets all the early or all the late slots of the
// round and a drift in throughput (another job on the box, clocks, heat) falls on every arm alike.
// With equal run counts (welch's defaults: replicates = head_controls) every block holds every
// arm exactly once.
//
// The shuffle is this file's own (SplitMix64 and Fisher-Yates), not std::shuffle, whose output
// differs between standard libraries: a recorded seed gives the same order everywhere.
// Thread-safety: stateless; pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace xv::sched {

struct ArmRuns {
  std::string arm;  // the candidate's name, or "head" for the controls; unique within a round
  int runs = 0;     // how many runs the arm has (replicates or head controls), >= 0
};

// One slot of the order: the `run`-th run (0-based, i.e. its replicate) of `arm`.
struct RunSlot {
  int position = 0;      // 0-based place in the round's order
  int block = 0;         // 0-based block
  size_t arm_index = 0;  // index into the arms given
  int run = 0;
};

// The round's order: every run of every arm exactly once, block by block (blocks in order, each
// shuffled with `seed`), an arm at most once per block; within an arm the runs go out in their
// own order (run 0 first).
std::vector<RunSlot> PlanRunOrder(const std::vector<ArmRuns>& arms, uint64_t seed);

// A seed for a new round's order (from std::random_device), in [1, 2^53) so that it survives
// JSON and SQLite as an exact integer.
uint64_t NewOrderSeed();

}  // namespace xv::sched
