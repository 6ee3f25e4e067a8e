#include "worker/event_outbox.h"

#include <gtest/gtest.h>

#include <thread>

#include "tests/unit/worker/outbox_test_fixtures.h"

namespace xv::worker {
namespace {

using std::chrono::milliseconds;
using testing::StepEvent;
using testing::SucceededFinished;

TEST(EventOutbox, SendsInOrderAndTimesOutWhenEmpty) {
  EventOutbox box;
  for (int s = 1; s <= 3; ++s) box.Push(StepEvent(7, 1, s));
  v1::WorkerMessage m;
  for (int s = 1; s <= 3; ++s) {
    ASSERT_TRUE(box.NextToSend(&m, milliseconds(10)));
    EXPECT_EQ(m.event().seq(), s);
  }
  EXPECT_FALSE(box.NextToSend(&m, milliseconds(10)));
  EXPECT_EQ(box.unsent(), 0u);
  EXPECT_EQ(box.held(), 3u);
}

TEST(EventOutbox, ResendsOnlyWhatWasNotAcknowledged) {
  EventOutbox box;
  for (int s = 1; s <= 4; ++s) box.Push(StepEvent(7, 1, s));
  box.Push(SucceededFinished(7, 1, 4));
  v1::WorkerMessage m;
  while (box.NextToSend(&m, milliseconds(1))) {
  }
  box.Ack(7, 1, 2, false);
  box.ResendUnacked();
  ASSERT_TRUE(box.NextToSend(&m, milliseconds(1)));
  EXPECT_EQ(m.event().seq(), 3);
  ASSERT_TRUE(box.NextToSend(&m, milliseconds(1)));
  EXPECT_EQ(m.event().seq(), 4);
  ASSERT_TRUE(box.NextToSend(&m, milliseconds(1)));
  EXPECT_TRUE(m.has_finished());
  box.Ack(7, 1, 4, true);
  EXPECT_EQ(box.held(), 0u);
}

TEST(EventOutbox, AcksOfAnotherAttemptDoNotDropMessages) {
  EventOutbox box;
  box.Push(StepEvent(7, 1, 1));
  box.Push(StepEvent(7, 2, 1));
  box.Ack(7, 1, 10, true);
  EXPECT_EQ(box.held(), 1u);
  v1::WorkerMessage m;
  ASSERT_TRUE(box.NextToSend(&m, milliseconds(1)));
  EXPECT_EQ(m.event().attempt(), 2);
}

TEST(EventOutbox, HeldAttemptsReportLastSeqAndFinished) {
  EventOutbox box;
  box.Push(StepEvent(3, 1, 1));
  box.Push(StepEvent(3, 1, 2));
  box.Push(SucceededFinished(3, 1, 2));
  box.Push(StepEvent(4, 1, 1));
  auto held = box.HeldAttempts();
  ASSERT_EQ(held.size(), 2u);
  EXPECT_EQ(held[0].experiment_id(), 3);
  EXPECT_EQ(held[0].last_seq(), 2);
  EXPECT_TRUE(held[0].finished());
  EXPECT_EQ(held[1].experiment_id(), 4);
  EXPECT_FALSE(held[1].finished());
}

TEST(EventOutbox, BoundsTheSentButUnacknowledgedMessages) {
  EventOutbox box(/*max_unacked=*/3);
  for (int s = 1; s <= 10; ++s) box.Push(StepEvent(1, 1, s));
  v1::WorkerMessage m;
  while (box.NextToSend(&m, milliseconds(1))) {
  }
  EXPECT_EQ(box.held(), 3u);
  box.ResendUnacked();
  ASSERT_TRUE(box.NextToSend(&m, milliseconds(1)));
  EXPECT_EQ(m.event().seq(), 8);
}

TEST(EventOutbox, WakeReleasesAWaiterAndPushWakesIt) {
  EventOutbox box;
  std::thread t([&] {
    std::this_thread::sleep_for(milliseconds(50));
    box.Push(StepEvent(1, 1, 1));
  });
  v1::WorkerMessage m;
  EXPECT_TRUE(box.NextToSend(&m, milliseconds(5000)));
  t.join();
  std::thread w([&] {
    std::this_thread::sleep_for(milliseconds(50));
    box.Wake();
  });
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(box.NextToSend(&m, milliseconds(5000)));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, milliseconds(4000));
  w.join();
}

}  // namespace
}  // namespace xv::worker
