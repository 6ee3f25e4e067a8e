// Tests of EventWriter (daemon/engine/event_writer.h) over a real SQLite store: the events of
// several sessions are stored and each session gets the acknowledgements of its own attempts after
// the commit; a session's Flush waits for its events; a stopped writer stores nothing more and
// says so.
#include "daemon/engine/event_writer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "daemon/store/store.h"
#include "tests/unit/daemon/fixtures/store_fixture.h"
#include "tests/unit/daemon/store/store_with_worker.h"

namespace xv::daemon {
namespace {

using store::testing::MakeEvent;
using store::testing::MakeRegister;
using store::testing::MakeSubmission;
using store::testing::TempDir;

std::string StepJson(int step) {
  return R"({"type":"step","step":)" + std::to_string(step) + R"(,"loss":2.5,"progress":0.5})";
}

class EventWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(store::Store::Open(dir_.file("xv.db"), &store_).ok());
    ASSERT_TRUE(store_->submissions().InsertSubmission(MakeSubmission(2), &ids_).ok());
    for (int i = 0; i < 2; ++i) {
      xv::v1::Register reg = MakeRegister("host:gpu" + std::to_string(i));
      int64_t worker = 0;
      ASSERT_TRUE(store_->workers().UpsertWorker(reg, &worker).ok());
      xv::v1::ExperimentSpec spec;
      ASSERT_TRUE(store_->attempts().AssignExperiment(ids_.experiment_ids[i], worker, &spec).ok());
      sessions_.push_back(std::make_shared<ConnectedWorker>(worker, reg, nullptr));
    }
  }

  // `n` step events of session i's attempt, seqs first..first+n-1.
  std::vector<xv::v1::TrainerEvent> Steps(int i, int64_t first, int n) {
    std::vector<xv::v1::TrainerEvent> out;
    for (int k = 0; k < n; ++k) {
      out.push_back(MakeEvent(ids_.experiment_ids[i], 1, first + k, "step",
                              StepJson(static_cast<int>(first + k))));
    }
    return out;
  }

  // The highest seq session i was acknowledged for its attempt (0 when none), from its outbox.
  int64_t AckedSeq(int i) {
    int64_t seq = 0;
    xv::v1::DaemonMessage msg;
    while (sessions_[i]->Pop(&msg, std::chrono::milliseconds(0))) {
      if (!msg.has_ack()) continue;
      EXPECT_EQ(msg.ack().experiment_id(), ids_.experiment_ids[i]);
      seq = std::max<int64_t>(seq, msg.ack().seq());
    }
    return seq;
  }

  int64_t MetricsRows() {
    return store::testing::QueryInt(dir_.file("xv.db"), "SELECT COUNT(*) FROM metrics");
  }

  TempDir dir_;
  std::unique_ptr<store::Store> store_;
  store::SubmissionIds ids_;
  std::vector<std::shared_ptr<ConnectedWorker>> sessions_;
};

TEST_F(EventWriterTest, StoresEverySessionsEventsAndAcknowledgesEachItsOwn) {
  EventWriter writer(store_.get());
  // Two sessions queue from their own threads, many small batches each.
  std::vector<std::thread> readers;
  for (int i = 0; i < 2; ++i) {
    readers.emplace_back([&, i] {
      for (int64_t first = 1; first <= 500; first += 10) {
        EXPECT_TRUE(writer.Enqueue(sessions_[i], Steps(i, first, 10)));
      }
    });
  }
  for (auto& t : readers) t.join();
  EXPECT_TRUE(writer.Flush(*sessions_[0]));
  EXPECT_TRUE(writer.Flush(*sessions_[1]));
  EXPECT_EQ(AckedSeq(0), 500);
  EXPECT_EQ(AckedSeq(1), 500);
  EXPECT_EQ(MetricsRows(), 1000);
  // A replay of what is stored is acknowledged again and adds nothing.
  ASSERT_TRUE(writer.Enqueue(sessions_[0], Steps(0, 1, 20)));
  EXPECT_TRUE(writer.Flush(*sessions_[0]));
  EXPECT_EQ(AckedSeq(0), 500);
  EXPECT_EQ(MetricsRows(), 1000);
  writer.Forget(*sessions_[0]);
  writer.Forget(*sessions_[1]);
}

TEST_F(EventWriterTest, AFinishedIsStoredAfterItsEventsAndAcknowledgedThenTheCallbackRuns) {
  std::atomic<int> passes{0};
  EventWriter writer(store_.get(), [&] { ++passes; });
  std::vector<xv::v1::TrainerEvent> events = Steps(0, 1, 3);
  events.push_back(MakeEvent(ids_.experiment_ids[0], 1, 4, "summary",
                             R"({"type":"summary","val_bpb":1.25,"training_seconds":1.0})"));
  ASSERT_TRUE(writer.Enqueue(sessions_[0], std::move(events)));
  xv::v1::Finished fin;
  fin.set_experiment_id(ids_.experiment_ids[0]);
  fin.set_attempt(1);
  fin.set_state("succeeded");
  fin.set_last_seq(4);
  ASSERT_TRUE(writer.EnqueueFinished(sessions_[0], fin));
  // Session 1 reports the end of an attempt it never held: acknowledged, nothing changes.
  xv::v1::Finished foreign = fin;
  ASSERT_TRUE(writer.EnqueueFinished(sessions_[1], foreign));
  EXPECT_TRUE(writer.Flush(*sessions_[0]));
  EXPECT_TRUE(writer.Flush(*sessions_[1]));
  const std::string db = dir_.file("xv.db");
  const std::string exp0 = std::to_string(ids_.experiment_ids[0]);
  EXPECT_EQ(store::testing::QueryInt(
                db, "SELECT state = 'succeeded' FROM experiments WHERE id = " + exp0),
            1);
  EXPECT_EQ(store::testing::QueryInt(db, "SELECT COUNT(*) FROM results WHERE experiment_id = " +
                                             exp0 + " AND val_bpb = 1.25"),
            1);
  // Session 0: the events' ack, then the Finished's (seq 4, finished); session 1: finished only.
  std::vector<xv::v1::EventAck> acks0, acks1;
  xv::v1::DaemonMessage msg;
  while (sessions_[0]->Pop(&msg, std::chrono::milliseconds(0))) acks0.push_back(msg.ack());
  while (sessions_[1]->Pop(&msg, std::chrono::milliseconds(0))) acks1.push_back(msg.ack());
  ASSERT_EQ(acks0.size(), 2u);
  EXPECT_FALSE(acks0[0].finished());
  EXPECT_EQ(acks0[0].seq(), 4);
  EXPECT_TRUE(acks0[1].finished());
  EXPECT_EQ(acks0[1].seq(), 4);
  ASSERT_EQ(acks1.size(), 1u);
  EXPECT_TRUE(acks1[0].finished());
  EXPECT_EQ(acks1[0].experiment_id(), ids_.experiment_ids[0]);
  EXPECT_GE(passes.load(), 1);
  // The experiment session 1 holds is untouched.
  EXPECT_EQ(store::testing::QueryInt(db, "SELECT state = 'assigned' FROM experiments WHERE id = " +
                                             std::to_string(ids_.experiment_ids[1])),
            1);
  writer.Forget(*sessions_[0]);
  writer.Forget(*sessions_[1]);
}

TEST_F(EventWriterTest, FlushOfASessionWithNothingQueuedReturnsAtOnce) {
  EventWriter writer(store_.get());
  EXPECT_TRUE(writer.Flush(*sessions_[0]));
  EXPECT_EQ(AckedSeq(0), 0);
}

TEST_F(EventWriterTest, AStoppedWriterTakesNothingAndFlushSaysSo) {
  EventWriter writer(store_.get());
  ASSERT_TRUE(writer.Enqueue(sessions_[0], Steps(0, 1, 3)));
  writer.Stop();  // stores what was queued first
  EXPECT_EQ(MetricsRows(), 3);
  EXPECT_EQ(AckedSeq(0), 3);
  EXPECT_FALSE(writer.Enqueue(sessions_[0], Steps(0, 4, 3)));
  EXPECT_FALSE(writer.Flush(*sessions_[0]));
  EXPECT_EQ(MetricsRows(), 3);
  EXPECT_EQ(AckedSeq(0), 0);
}

}  // namespace
}  // namespace xv::daemon
