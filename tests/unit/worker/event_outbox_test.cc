#include "worker/event_outbox.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <thread>

#include "common/untrusted_text.h"
#include "tests/unit/worker/outbox_test_fixtures.h"
#include "worker/message_text_repair.h"

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

TEST(EventOutbox, FreshEventsGoInBatchesAndResendsGoAlone) {
  EventOutbox box;
  for (int s = 1; s <= 5; ++s) box.Push(StepEvent(7, 1, s));
  box.Push(SucceededFinished(7, 1, 5));
  v1::WorkerMessage m;
  // At most 3 per batch: 1-3, then 4-5 (the Finished never joins a batch).
  ASSERT_TRUE(box.NextToSend(&m, milliseconds(1), 3));
  ASSERT_TRUE(m.has_event_batch());
  ASSERT_EQ(m.event_batch().events_size(), 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(m.event_batch().events(i).seq(), i + 1);
  ASSERT_TRUE(box.NextToSend(&m, milliseconds(1), 3));
  ASSERT_EQ(m.event_batch().events_size(), 2);
  EXPECT_EQ(m.event_batch().events(1).seq(), 5);
  ASSERT_TRUE(box.NextToSend(&m, milliseconds(1), 3));
  EXPECT_TRUE(m.has_finished());
  // Each event is still acknowledged on its own; what was not is resent one per message.
  box.Ack(7, 1, 2, false);
  EXPECT_EQ(box.held(), 4u);
  box.ResendUnacked();
  for (int s = 3; s <= 5; ++s) {
    ASSERT_TRUE(box.NextToSend(&m, milliseconds(1), 3));
    ASSERT_TRUE(m.has_event()) << "seq " << s;
    EXPECT_EQ(m.event().seq(), s);
  }
  // A single ready event goes as a plain event, not a batch of one.
  box.Push(StepEvent(8, 1, 1));
  ASSERT_TRUE(box.NextToSend(&m, milliseconds(1), 3));
  ASSERT_TRUE(m.has_finished());  // the resent Finished first, in order
  ASSERT_TRUE(box.NextToSend(&m, milliseconds(1), 3));
  ASSERT_TRUE(m.has_event());
  EXPECT_EQ(m.event().experiment_id(), 8);
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

// A daemon that stores events and acknowledges the highest contiguous seq at once, and whose
// session ends (it crashes) whenever it is sent an `error` event: the 3 MB line of issue 11.
struct CrashOnErrorDaemon {
  std::set<int64_t> stored;
  std::map<int64_t, std::string> types;
  int crashes = 0;
  std::string finished_state;

  // Feeds everything the outbox sends until it holds nothing or `rounds` waits came back empty.
  void Serve(EventOutbox* box, int rounds = 200) {
    v1::WorkerMessage m;
    for (int i = 0; i < rounds && box->held() > 0; ++i) {
      if (!box->NextToSend(&m, milliseconds(50))) continue;
      if (m.has_event() && m.event().type() == "error") {
        ++crashes;
        box->ResendUnacked();  // the session ended; the worker reconnects
        continue;
      }
      const int64_t exp = m.has_event() ? m.event().experiment_id() : m.finished().experiment_id();
      if (m.has_event()) {
        stored.insert(m.event().seq());
        types[m.event().seq()] = m.event().json();
      } else {
        finished_state = m.finished().state();
      }
      int64_t contiguous = 0;
      while (stored.count(contiguous + 1)) ++contiguous;
      box->Ack(exp, 1, contiguous, m.has_finished());
    }
  }
};

TEST(EventOutbox, AMessageTheDaemonNeverTakesIsSetAsideAfterBoundedRetries) {
  OutboxRetryPolicy retry;
  retry.max_failed_sends = 3;
  retry.first_backoff = milliseconds(1);
  retry.max_backoff = milliseconds(4);
  EventOutbox box(20000, retry);
  for (int s = 1; s <= 5; ++s) {
    v1::WorkerMessage m = StepEvent(7, 1, s);
    if (s == 3) {
      m.mutable_event()->set_type("error");
      m.mutable_event()->set_json(R"({"type":"error","message":"deep"})");
    }
    box.Push(m);
  }
  box.Push(SucceededFinished(7, 1, 5));
  CrashOnErrorDaemon daemon;
  daemon.Serve(&box);
  EXPECT_EQ(box.held(), 0u);
  EXPECT_EQ(box.quarantined(), 1u);
  EXPECT_EQ(daemon.crashes, 3) << "bounded: max_failed_sends sessions, then set aside";
  EXPECT_EQ(daemon.stored, (std::set<int64_t>{1, 2, 3, 4, 5}));
  // Seq 3 is a stand-in that says what was set aside and why; the attempt still finishes as it did.
  EXPECT_NE(daemon.types[3].find(R"("type":"quarantined")"), std::string::npos) << daemon.types[3];
  EXPECT_NE(daemon.types[3].find(R"("original_type":"error")"), std::string::npos);
  EXPECT_NE(daemon.types[3].find("never acknowledged"), std::string::npos);
  EXPECT_EQ(daemon.finished_state, "succeeded");
}

TEST(EventOutbox, ASuspectIsSentAloneSoOnlyThePoisonedMessageIsSetAside) {
  OutboxRetryPolicy retry;
  retry.max_failed_sends = 3;
  retry.first_backoff = milliseconds(1);
  retry.max_backoff = milliseconds(2);
  EventOutbox box(20000, retry);
  for (int s = 1; s <= 4; ++s) box.Push(StepEvent(7, 1, s));
  v1::WorkerMessage poison = StepEvent(7, 1, 5);
  poison.mutable_event()->set_type("error");
  box.Push(poison);
  // Everything goes out in one burst and the session ends before any acknowledgement, twice: all
  // five are suspects now.
  v1::WorkerMessage m;
  for (int session = 0; session < 2; ++session) {
    while (box.NextToSend(&m, milliseconds(1))) {
    }
    box.ResendUnacked();
  }
  // Suspects go one at a time: nothing else is sent while one waits for its acknowledgement.
  ASSERT_TRUE(box.NextToSend(&m, milliseconds(100)));
  EXPECT_EQ(m.event().seq(), 1);
  EXPECT_FALSE(box.NextToSend(&m, milliseconds(20)));
  box.Ack(7, 1, 1, false);
  CrashOnErrorDaemon daemon;
  daemon.stored = {1};
  daemon.Serve(&box);
  EXPECT_EQ(box.held(), 0u);
  EXPECT_EQ(box.quarantined(), 1u);
  EXPECT_EQ(daemon.stored, (std::set<int64_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(daemon.crashes, 1);
  EXPECT_NE(daemon.types[5].find("quarantined"), std::string::npos);
  EXPECT_EQ(daemon.types[2], StepEvent(7, 1, 2).event().json());
}

TEST(EventOutbox, UnacknowledgedMessagesAreResentAfterTheAckTimeoutThenSetAside) {
  OutboxRetryPolicy retry;
  retry.max_failed_sends = 2;
  retry.ack_timeout = milliseconds(30);
  retry.first_backoff = milliseconds(1);
  retry.max_backoff = milliseconds(1);
  EventOutbox box(20000, retry);
  box.Push(SucceededFinished(4, 2, 0));
  // A daemon that never acknowledges and keeps the session open.
  std::vector<std::string> sent_states;
  v1::WorkerMessage m;
  const auto t0 = std::chrono::steady_clock::now();
  while (box.held() > 0 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5)) {
    if (box.NextToSend(&m, milliseconds(50))) sent_states.push_back(m.finished().state());
  }
  EXPECT_EQ(box.held(), 0u);
  EXPECT_EQ(box.quarantined(), 2u);  // the original, then its stand-in
  EXPECT_EQ(sent_states, (std::vector<std::string>{"succeeded", "succeeded", "failed", "failed"}));
}

TEST(EventOutbox, EverythingPushedIsValidUtf8) {
  EventOutbox box;
  v1::WorkerMessage fin = SucceededFinished(3, 1, 0);
  fin.mutable_finished()->set_stderr_tail("tail \xFF\xFE");
  fin.mutable_finished()->set_failure_detail("\xC3");
  box.Push(fin);
  v1::WorkerMessage m;
  ASSERT_TRUE(box.NextToSend(&m, milliseconds(1)));
  EXPECT_EQ(m.finished().stderr_tail(), "tail \xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(m.finished().failure_detail(), "\xEF\xBF\xBD");
}

TEST(MessageTextRepair, RepairsEveryStringFieldAndNamesIt) {
  v1::WorkerMessage m;
  v1::Register* reg = m.mutable_register_();
  reg->set_worker_name("gpu0");
  reg->mutable_device()->set_name("NVIDIA \xFF");
  (*reg->mutable_device()->mutable_env_knobs())["PYTORCH_CUDA_ALLOC_CONF"] = "x\xC3";
  reg->mutable_capabilities()->add_trainers("ok");
  reg->mutable_capabilities()->add_trainers(
      "b\xFE"
      "d");
  std::vector<std::string> fixed = RepairMessageText(&m);
  std::sort(fixed.begin(), fixed.end());
  EXPECT_EQ(fixed,
            (std::vector<std::string>{"register.capabilities.trainers",
                                      "register.device.env_knobs.value", "register.device.name"}));
  // What the daemon does with it: a proto3 string field refuses invalid UTF-8 on parse.
  v1::WorkerMessage back;
  EXPECT_TRUE(back.ParseFromString(m.SerializeAsString()));
  EXPECT_EQ(back.register_().device().name(), "NVIDIA \xEF\xBF\xBD");
  EXPECT_EQ(back.register_().worker_name(), "gpu0");
  EXPECT_TRUE(RepairMessageText(&back).empty());
}

}  // namespace
}  // namespace xv::worker
