// KillEscalation without processes: a table of clocks and happenings (cancel, deadline, reap) and
// the step each turn of the attempt's loop must take; the output linger after the reap; and when
// the next step falls due.
#include "worker/kill_escalation.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace xv::worker {
namespace {

using Clock = KillEscalation::Clock;

const Clock::time_point kStart = Clock::time_point() + std::chrono::hours(1);

Clock::time_point At(double seconds) {
  return kStart +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// One turn of the loop: at `t_s`, either the trainer is reaped, or Next is asked (with or without
// a cancel requested) and must answer `expect`.
struct Turn {
  double t_s;
  enum What { kNext, kNextCancelled, kReaped } what;
  KillStep expect = KillStep::kNone;
};

struct Case {
  std::string name;
  KillEscalation::Limits limits;
  std::vector<Turn> turns;
  KillReason reason_at_end;
};

const char* Name(KillStep s) {
  switch (s) {
    case KillStep::kNone:
      return "none";
    case KillStep::kTerm:
      return "TERM";
    case KillStep::kKill:
      return "KILL";
  }
  return "?";
}

TEST(KillEscalationTest, TableOfCases) {
  using T = Turn;
  const std::vector<Case> cases = {
      {"no deadline and no cancel: never a signal",
       {0, 5, 2},
       {{0, T::kNext}, {1e6, T::kNext}},
       KillReason::kNone},
      {"deadline: TERM only strictly after it, KILL strictly after the grace, each once",
       {10, 5, 2},
       {{9.9, T::kNext},
        {10.0, T::kNext},
        {10.5, T::kNext, KillStep::kTerm},
        {10.6, T::kNext},
        {15.5, T::kNext},
        {15.6, T::kNext, KillStep::kKill},
        {100, T::kNext},
        {100, T::kNextCancelled}},
       KillReason::kDeadline},
      {"cancel: TERM at once, the deadline later changes nothing",
       {10, 5, 2},
       {{3, T::kNextCancelled, KillStep::kTerm},
        {8.0, T::kNextCancelled},
        {11, T::kNext, KillStep::kKill},
        {12, T::kNext}},
       KillReason::kCancel},
      {"cancel and deadline at the same turn: the cancel names the reason",
       {10, 5, 2},
       {{12, T::kNextCancelled, KillStep::kTerm}},
       KillReason::kCancel},
      {"reaped before the deadline: no TERM for a cancel or the deadline after it",
       {10, 5, 2},
       {{5, T::kReaped}, {20, T::kNext}, {21, T::kNextCancelled}, {100, T::kNext}},
       KillReason::kNone},
      {"reaped between TERM and the grace's end: the KILL still follows",
       {10, 5, 2},
       {{11, T::kNext, KillStep::kTerm},
        {12, T::kReaped},
        {15, T::kNext},
        {16.5, T::kNext, KillStep::kKill}},
       KillReason::kDeadline},
      {"zero grace: KILL at the first turn after the TERM's",
       {0, 0, 2},
       {{1, T::kNextCancelled, KillStep::kTerm},
        {1, T::kNextCancelled},
        {1.001, T::kNextCancelled, KillStep::kKill},
        {2, T::kNextCancelled}},
       KillReason::kCancel},
      {"a negative deadline is no deadline", {-1, 5, 2}, {{1e6, T::kNext}}, KillReason::kNone},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    KillEscalation e(c.limits, kStart);
    for (size_t i = 0; i < c.turns.size(); ++i) {
      const Turn& turn = c.turns[i];
      SCOPED_TRACE("turn " + std::to_string(i) + " at " + std::to_string(turn.t_s) + " s");
      if (turn.what == Turn::kReaped) {
        e.MarkReaped(At(turn.t_s));
        EXPECT_TRUE(e.reaped());
        continue;
      }
      const KillStep got = e.Next(At(turn.t_s), turn.what == Turn::kNextCancelled);
      EXPECT_EQ(got, turn.expect) << "got " << Name(got) << ", want " << Name(turn.expect);
    }
    EXPECT_EQ(e.reason(), c.reason_at_end);
    EXPECT_EQ(e.deadline_s(), c.limits.deadline_s);
  }
}

TEST(KillEscalationTest, ReadsOutputAfterTheReapUntilPipesCloseOrTheLingerEnds) {
  KillEscalation e({10, 5, 2}, kStart);
  EXPECT_FALSE(e.StopReading(At(1), /*pipes_open=*/false)) << "not reaped: keep reading";
  EXPECT_FALSE(e.StopReading(At(1000), /*pipes_open=*/true));
  e.MarkReaped(At(5));
  EXPECT_TRUE(e.StopReading(At(5), /*pipes_open=*/false)) << "pipes closed: stop at once";
  EXPECT_FALSE(e.StopReading(At(6.9), /*pipes_open=*/true));
  EXPECT_FALSE(e.StopReading(At(7.0), /*pipes_open=*/true)) << "the linger ends strictly after";
  EXPECT_TRUE(e.StopReading(At(7.1), /*pipes_open=*/true));
  e.MarkReaped(At(50));  // a second reap does not restart the linger
  EXPECT_TRUE(e.StopReading(At(7.1), /*pipes_open=*/true));
}

TEST(KillEscalationTest, SaysWhenTheNextStepFallsDue) {
  KillEscalation none({0, 5, 2}, kStart);
  EXPECT_FALSE(none.NextStepAt().has_value()) << "no deadline: only a cancel starts anything";

  KillEscalation e({10, 5, 2}, kStart);
  ASSERT_TRUE(e.NextStepAt().has_value());
  EXPECT_EQ(*e.NextStepAt(), At(10));
  ASSERT_EQ(e.Next(At(11), false), KillStep::kTerm);
  ASSERT_TRUE(e.NextStepAt().has_value());
  EXPECT_EQ(*e.NextStepAt(), At(16)) << "the grace runs from the TERM";
  ASSERT_EQ(e.Next(At(16.5), false), KillStep::kKill);
  EXPECT_FALSE(e.NextStepAt().has_value()) << "after the KILL nothing is left to send";

  KillEscalation reaped({10, 5, 2}, kStart);
  reaped.MarkReaped(At(3));
  EXPECT_FALSE(reaped.NextStepAt().has_value()) << "reaped before the deadline: nothing is due";
}

}  // namespace
}  // namespace xv::worker
