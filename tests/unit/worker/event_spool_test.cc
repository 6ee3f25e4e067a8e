// EventSpool and the spooled EventOutbox on real files in a temp directory: records survive a
// reopen, a torn last record (a crash mid-write) is dropped with a warning naming the file and the
// offset, a flipped byte fails the CRC check, acknowledgements shrink the file (compaction) and a
// finished attempt's file is deleted; an outbox rebuilt from the spool resends exactly what was not
// acknowledged.
#include "worker/event_spool.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/unit/worker/outbox_test_fixtures.h"
#include "worker/event_outbox.h"
#include "worker/orphan_trainer.h"

namespace xv::worker {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using testing::ScratchDir;
using testing::StepEvent;
using testing::SucceededFinished;

class EventSpoolTest : public ::testing::Test {
 protected:
  std::unique_ptr<EventSpool> OpenSpool() {
    std::unique_ptr<EventSpool> spool;
    Status st = EventSpool::Open(dir_.string(), &spool);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return spool;
  }
  std::vector<SpooledAttempt> Recover(std::vector<std::string>* warnings = nullptr) {
    std::vector<std::string> w;
    std::vector<SpooledAttempt> out;
    auto spool = OpenSpool();
    Status st = spool->Recover(&out, warnings ? warnings : &w);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return out;
  }
  ScratchDir scratch_{"spool"};
  const fs::path dir_ = scratch_.path();  // not created: EventSpool::Open makes it
};

TEST(SpoolCrc32, MatchesTheStandardCheckValue) {
  const std::string s = "123456789";
  EXPECT_EQ(SpoolCrc32(s.data(), s.size()), 0xCBF43926u);
  // Continuing over two pieces equals one pass.
  EXPECT_EQ(SpoolCrc32(s.data() + 4, 5, SpoolCrc32(s.data(), 4)), 0xCBF43926u);
}

TEST_F(EventSpoolTest, RecordsSurviveAReopenPerAttempt) {
  {
    auto spool = OpenSpool();
    std::vector<SpooledAttempt> none;
    std::vector<std::string> warnings;
    ASSERT_TRUE(spool->Recover(&none, &warnings).ok());
    EXPECT_TRUE(none.empty());
    for (int s = 1; s <= 3; ++s) ASSERT_TRUE(spool->Append(StepEvent(7, 1, s)).ok());
    ASSERT_TRUE(spool->Append(SucceededFinished(7, 1, 3)).ok());
    ASSERT_TRUE(spool->Append(StepEvent(8, 2, 1)).ok());
    ASSERT_TRUE(spool->SyncDirty().ok());
    EXPECT_TRUE(fs::exists(spool->PathOf(7, 1)));
    EXPECT_EQ(spool->PathOf(7, 1), (dir_ / "exp-7-a1.spool").string());
    v1::WorkerMessage heartbeat;
    heartbeat.mutable_heartbeat();
    EXPECT_EQ(spool->Append(heartbeat).code(), Status::Code::kInvalidArgument);
  }
  std::vector<std::string> warnings;
  auto attempts = Recover(&warnings);
  EXPECT_TRUE(warnings.empty());
  ASSERT_EQ(attempts.size(), 2u);
  const SpooledAttempt& a = attempts[0];
  EXPECT_EQ(a.experiment_id, 7);
  EXPECT_EQ(a.attempt, 1);
  EXPECT_TRUE(a.finished);
  EXPECT_EQ(a.last_seq, 3);
  ASSERT_EQ(a.messages.size(), 4u);
  for (int s = 1; s <= 3; ++s) {
    EXPECT_EQ(a.messages[s - 1].event().seq(), s);
    EXPECT_EQ(a.messages[s - 1].event().json(), StepEvent(7, 1, s).event().json());
  }
  EXPECT_EQ(a.messages[3].finished().stderr_tail(), "val_bpb: 1.2\n");
  EXPECT_FALSE(attempts[1].finished);
  EXPECT_EQ(attempts[1].experiment_id, 8);
  EXPECT_EQ(attempts[1].attempt, 2);
  EXPECT_EQ(attempts[1].messages.size(), 1u);
}

TEST_F(EventSpoolTest, ATornLastRecordIsDroppedWithTheFileAndOffset) {
  std::string path;
  uintmax_t two_records = 0;
  {
    auto spool = OpenSpool();
    std::vector<SpooledAttempt> none;
    std::vector<std::string> w;
    ASSERT_TRUE(spool->Recover(&none, &w).ok());
    ASSERT_TRUE(spool->Append(StepEvent(3, 1, 1)).ok());
    ASSERT_TRUE(spool->Append(StepEvent(3, 1, 2)).ok());
    path = spool->PathOf(3, 1);
    two_records = fs::file_size(path);
    ASSERT_TRUE(spool->Append(StepEvent(3, 1, 3)).ok());
  }
  // A crash in the middle of writing the third record.
  const uintmax_t full = fs::file_size(path);
  fs::resize_file(path, two_records + (full - two_records) / 2);

  std::vector<std::string> warnings;
  auto attempts = Recover(&warnings);
  ASSERT_EQ(attempts.size(), 1u);
  ASSERT_EQ(attempts[0].messages.size(), 2u);
  EXPECT_EQ(attempts[0].messages[1].event().seq(), 2);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find(path), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("torn record at offset " + std::to_string(two_records)),
            std::string::npos)
      << warnings[0];
  // The file was cut back to the last whole record, so appending continues cleanly.
  EXPECT_EQ(fs::file_size(path), two_records);
  {
    auto spool = OpenSpool();
    std::vector<SpooledAttempt> again;
    std::vector<std::string> w;
    ASSERT_TRUE(spool->Recover(&again, &w).ok());
    ASSERT_TRUE(spool->Append(StepEvent(3, 1, 3)).ok());
  }
  warnings.clear();
  attempts = Recover(&warnings);
  EXPECT_TRUE(warnings.empty());
  ASSERT_EQ(attempts[0].messages.size(), 3u);
  EXPECT_EQ(attempts[0].messages[2].event().seq(), 3);

  // Fewer bytes than a record header at the end: torn too.
  std::ofstream(path, std::ios::binary | std::ios::app) << "abc";
  warnings.clear();
  attempts = Recover(&warnings);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("torn record"), std::string::npos) << warnings[0];
  EXPECT_EQ(attempts[0].messages.size(), 3u);
}

TEST_F(EventSpoolTest, AFlippedByteFailsTheCrcCheck) {
  std::string path;
  uintmax_t one_record = 0;
  {
    auto spool = OpenSpool();
    std::vector<SpooledAttempt> none;
    std::vector<std::string> w;
    ASSERT_TRUE(spool->Recover(&none, &w).ok());
    ASSERT_TRUE(spool->Append(StepEvent(4, 1, 1)).ok());
    path = spool->PathOf(4, 1);
    one_record = fs::file_size(path);
    ASSERT_TRUE(spool->Append(StepEvent(4, 1, 2)).ok());
    ASSERT_TRUE(spool->Append(StepEvent(4, 1, 3)).ok());
  }
  {
    // Flip one payload byte of the second record (past its 9-byte header).
    std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
    f.seekg(static_cast<std::streamoff>(one_record + 12));
    char c = 0;
    f.read(&c, 1);
    f.seekp(static_cast<std::streamoff>(one_record + 12));
    c ^= 0x40;
    f.write(&c, 1);
  }
  std::vector<std::string> warnings;
  auto attempts = Recover(&warnings);
  ASSERT_EQ(attempts.size(), 1u);
  ASSERT_EQ(attempts[0].messages.size(), 1u);
  EXPECT_EQ(attempts[0].messages[0].event().seq(), 1);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("CRC32"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("offset " + std::to_string(one_record)), std::string::npos)
      << warnings[0];
  EXPECT_TRUE(fs::exists(path + ".corrupt"));
  EXPECT_EQ(fs::file_size(path), one_record);
}

TEST_F(EventSpoolTest, AFileThatIsNotASpoolIsSetAside) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "exp-9-a1.spool") << "hello, not a spool";
  std::ofstream(dir_ / "exp-9-a2.spool") << "XVSP";  // torn while being created
  std::ofstream(dir_ / "notes.txt") << "ignored";
  std::vector<std::string> warnings;
  auto attempts = Recover(&warnings);
  EXPECT_TRUE(attempts.empty());
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[0].find("bad magic"), std::string::npos) << warnings[0];
  EXPECT_TRUE(fs::exists(dir_ / "exp-9-a1.spool.unreadable"));
  EXPECT_NE(warnings[1].find("torn at creation"), std::string::npos) << warnings[1];
  EXPECT_FALSE(fs::exists(dir_ / "exp-9-a2.spool"));
  EXPECT_TRUE(fs::exists(dir_ / "notes.txt"));
}

TEST_F(EventSpoolTest, AcknowledgementsCompactTheFileAndSurviveAReopen) {
  const int n = 3000;
  std::string path;
  uintmax_t before = 0;
  {
    auto spool = OpenSpool();
    std::vector<SpooledAttempt> none;
    std::vector<std::string> w;
    ASSERT_TRUE(spool->Recover(&none, &w).ok());
    std::vector<v1::WorkerMessage> held;
    for (int s = 1; s <= n; ++s) {
      held.push_back(StepEvent(5, 1, s));
      ASSERT_TRUE(spool->Append(held.back()).ok());
    }
    path = spool->PathOf(5, 1);
    // A small acknowledgement only appends an ack record.
    held.erase(held.begin(), held.begin() + 10);
    ASSERT_TRUE(spool->Acknowledge(5, 1, 10, held).ok());
    EXPECT_GT(fs::file_size(path), 0u);
    before = fs::file_size(path);
    // Most of the file acknowledged: it is rewritten with the held records only.
    held.erase(held.begin(), held.begin() + 2490);  // seq 2501..3000 left
    ASSERT_TRUE(spool->Acknowledge(5, 1, 2500, held).ok());
    EXPECT_LT(fs::file_size(path), before / 4);
    // Appending continues in the rewritten file.
    ASSERT_TRUE(spool->Append(SucceededFinished(5, 1, n)).ok());
    // An older or equal acknowledgement changes nothing.
    const uintmax_t size = fs::file_size(path);
    ASSERT_TRUE(spool->Acknowledge(5, 1, 2000, held).ok());
    EXPECT_EQ(fs::file_size(path), size);
  }
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  std::vector<std::string> warnings;
  auto attempts = Recover(&warnings);
  EXPECT_TRUE(warnings.empty());
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(attempts[0].acked_seq, 2500);
  ASSERT_EQ(attempts[0].messages.size(), 501u);
  EXPECT_EQ(attempts[0].messages[0].event().seq(), 2501);
  EXPECT_TRUE(attempts[0].finished);
  EXPECT_EQ(attempts[0].last_seq, n);

  // Without compaction the ack record alone drops the acknowledged prefix at recovery.
  {
    auto spool = OpenSpool();
    std::vector<SpooledAttempt> a;
    std::vector<std::string> w;
    ASSERT_TRUE(spool->Recover(&a, &w).ok());
    ASSERT_TRUE(spool->Acknowledge(5, 1, 2600, {}).ok());
  }
  attempts = Recover();
  ASSERT_EQ(attempts[0].messages.size(), 401u);
  EXPECT_EQ(attempts[0].messages[0].event().seq(), 2601);
}

TEST_F(EventSpoolTest, RemoveDeletesTheAttemptsFile) {
  auto spool = OpenSpool();
  std::vector<SpooledAttempt> none;
  std::vector<std::string> w;
  ASSERT_TRUE(spool->Recover(&none, &w).ok());
  ASSERT_TRUE(spool->Append(StepEvent(6, 1, 1)).ok());
  ASSERT_TRUE(spool->Append(StepEvent(6, 2, 1)).ok());
  EXPECT_EQ(spool->open_files(), 2u);
  ASSERT_TRUE(spool->Remove(6, 1).ok());
  EXPECT_FALSE(fs::exists(spool->PathOf(6, 1)));
  EXPECT_TRUE(fs::exists(spool->PathOf(6, 2)));
  EXPECT_EQ(spool->open_files(), 1u);
  EXPECT_TRUE(spool->Remove(6, 1).ok());  // again: nothing to do
}

TEST_F(EventSpoolTest, OpenNamesTheDirectoryItCannotCreate) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "file") << "x";
  std::unique_ptr<EventSpool> spool;
  Status st = EventSpool::Open((dir_ / "file" / "spool").string(), &spool);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find((dir_ / "file" / "spool").string()), std::string::npos)
      << st.ToString();
}

TEST_F(EventSpoolTest, OneLiveSpoolPerDirectory) {
  auto first = OpenSpool();
  std::unique_ptr<EventSpool> second;
  Status st = EventSpool::Open(dir_.string(), &second);
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition) << st.ToString();
  EXPECT_NE(st.message().find("pid " + std::to_string(::getpid())), std::string::npos)
      << st.ToString();
  EXPECT_NE(st.message().find("--work-dir"), std::string::npos) << st.ToString();
  first.reset();
  EXPECT_TRUE(EventSpool::Open(dir_.string(), &second).ok());
}

TEST_F(EventSpoolTest, OutboxRebuiltFromTheSpoolResendsOnlyWhatWasNotAcknowledged) {
  {
    EventOutbox box;
    std::vector<SpooledAttempt> recovered;
    ASSERT_TRUE(box.AttachSpool(OpenSpool(), &recovered).ok());
    EXPECT_TRUE(recovered.empty());
    for (int s = 1; s <= 5; ++s) box.Push(StepEvent(7, 1, s));
    box.Push(SucceededFinished(7, 1, 5));
    box.Push(StepEvent(8, 1, 1));
    v1::WorkerMessage m;
    while (box.NextToSend(&m, milliseconds(1))) {
    }
    box.Ack(7, 1, 2, false);
    box.Ack(8, 1, 1, false);
  }  // the worker process ends here, nothing else acknowledged
  EventOutbox box;
  std::vector<SpooledAttempt> recovered;
  ASSERT_TRUE(box.AttachSpool(OpenSpool(), &recovered).ok());
  ASSERT_EQ(recovered.size(), 2u);
  EXPECT_TRUE(recovered[0].finished);
  EXPECT_FALSE(recovered[1].finished);
  EXPECT_TRUE(recovered[1].messages.empty());  // all of its events were acknowledged
  auto held = box.HeldAttempts();
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].experiment_id(), 7);
  EXPECT_EQ(held[0].last_seq(), 5);
  EXPECT_TRUE(held[0].finished());
  v1::WorkerMessage m;
  for (int s = 3; s <= 5; ++s) {
    ASSERT_TRUE(box.NextToSend(&m, milliseconds(1)));
    EXPECT_EQ(m.event().seq(), s);
  }
  ASSERT_TRUE(box.NextToSend(&m, milliseconds(1)));
  EXPECT_TRUE(m.has_finished());
  EXPECT_FALSE(box.NextToSend(&m, milliseconds(1)));

  // The attempt whose trainer died with the old process: nothing held, so its file goes at once.
  box.MarkAbandoned(8, 1);
  EXPECT_FALSE(fs::exists(dir_ / "exp-8-a1.spool"));
  // The Finished acknowledged: the attempt is done and its file deleted.
  box.Ack(7, 1, 5, true);
  EXPECT_EQ(box.held(), 0u);
  EXPECT_FALSE(fs::exists(dir_ / "exp-7-a1.spool"));
}

TEST_F(EventSpoolTest, AMessageSetAsideGoesToTheQuarantineFileAndIsNotReplayedAfterARestart) {
  OutboxRetryPolicy retry;
  retry.max_failed_sends = 2;
  retry.first_backoff = milliseconds(1);
  retry.max_backoff = milliseconds(1);
  {
    EventOutbox box(20000, retry);
    std::vector<SpooledAttempt> recovered;
    ASSERT_TRUE(box.AttachSpool(OpenSpool(), &recovered).ok());
    box.Push(StepEvent(5, 1, 1));
    v1::WorkerMessage poison = StepEvent(5, 1, 2);
    poison.mutable_event()->set_type("error");
    poison.mutable_event()->set_json(R"({"type":"error","message":")" + std::string(5000, '[') +
                                     "\"}");
    box.Push(poison);
    box.Push(StepEvent(5, 1, 3));
    v1::WorkerMessage m;
    ASSERT_TRUE(box.NextToSend(&m, milliseconds(1)));
    box.Ack(5, 1, 1, false);
    // The daemon dies on seq 2 each time it is sent, twice.
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(box.NextToSend(&m, milliseconds(100)));
      ASSERT_EQ(m.event().seq(), 2);
      box.ResendUnacked();
    }
    ASSERT_TRUE(box.NextToSend(&m, milliseconds(100)));
    EXPECT_EQ(m.event().seq(), 2);
    EXPECT_EQ(m.event().type(), "quarantined");
    EXPECT_EQ(box.quarantined(), 1u);
  }  // the worker process ends before the daemon acknowledged the stand-in
  const fs::path quarantine = dir_ / "exp-5-a1.quarantine";
  ASSERT_TRUE(fs::exists(quarantine));
  std::ifstream in(quarantine, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string data = buf.str();
  EXPECT_EQ(data.substr(0, 8), "XVQUAR01");
  EXPECT_NE(data.find("never acknowledged"), std::string::npos);    // the reason record
  EXPECT_NE(data.find(std::string(5000, '[')), std::string::npos);  // the original, kept whole

  // A restarted worker replays the stand-in and seq 3, never the original.
  EventOutbox box;
  std::vector<SpooledAttempt> recovered;
  ASSERT_TRUE(box.AttachSpool(OpenSpool(), &recovered).ok());
  v1::WorkerMessage m;
  ASSERT_TRUE(box.NextToSend(&m, milliseconds(1)));
  EXPECT_EQ(m.event().seq(), 2);
  EXPECT_EQ(m.event().type(), "quarantined");
  ASSERT_TRUE(box.NextToSend(&m, milliseconds(1)));
  EXPECT_EQ(m.event().seq(), 3);
  EXPECT_FALSE(box.NextToSend(&m, milliseconds(1)));
  // The quarantine file is left for the operator.
  box.Ack(5, 1, 3, true);
  EXPECT_FALSE(fs::exists(dir_ / "exp-5-a1.spool"));
  EXPECT_TRUE(fs::exists(quarantine));
}

TEST_F(EventSpoolTest, AnAbandonedAttemptIsNotReportedAndGoesWhenItsEventsAreAcknowledged) {
  {
    EventOutbox box;
    std::vector<SpooledAttempt> recovered;
    ASSERT_TRUE(box.AttachSpool(OpenSpool(), &recovered).ok());
    for (int s = 1; s <= 4; ++s) box.Push(StepEvent(9, 1, s));
  }
  EventOutbox box;
  std::vector<SpooledAttempt> recovered;
  ASSERT_TRUE(box.AttachSpool(OpenSpool(), &recovered).ok());
  ASSERT_EQ(recovered.size(), 1u);
  EXPECT_FALSE(recovered[0].finished);
  box.MarkAbandoned(9, 1);
  EXPECT_TRUE(box.HeldAttempts().empty());
  EXPECT_EQ(box.unsent(), 4u);  // still replayed
  box.Ack(9, 1, 3, false);
  EXPECT_TRUE(fs::exists(dir_ / "exp-9-a1.spool"));
  box.Ack(9, 1, 4, false);
  EXPECT_EQ(box.held(), 0u);
  EXPECT_FALSE(fs::exists(dir_ / "exp-9-a1.spool"));
}

// A trainer left running by a killed worker (own process group, XV_SPEC_DIR inside the work dir)
// is killed with its group; a process of another work dir is left alone.
TEST_F(EventSpoolTest, OrphanedTrainersOfTheWorkDirAreKilled) {
  auto spawn = [](const std::string& spec_dir) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setpgid(0, 0);
      ::setenv("XV_SPEC_DIR", spec_dir.c_str(), 1);
      ::execl("/bin/sh", "sh", "-c", "sleep 30 & wait", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    return pid;
  };
  const std::string work = (dir_ / "work").string();
  pid_t orphan = spawn(work + "/exp-3-a1");
  pid_t other = spawn((dir_ / "work-other").string() + "/exp-3-a1");
  ASSERT_GT(orphan, 0);
  ASSERT_GT(other, 0);
  std::this_thread::sleep_for(milliseconds(200));  // the shell and its sleep are running
  EXPECT_EQ(KillOrphanedTrainers(work, 5), 2);     // sh and its sleep
  int status = 0;
  ASSERT_EQ(::waitpid(orphan, &status, 0), orphan);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_EQ(::waitpid(other, &status, WNOHANG), 0) << "a process of another work dir was killed";
  ::kill(-other, SIGKILL);
  ::waitpid(other, &status, 0);
  EXPECT_EQ(KillOrphanedTrainers(work, 1), 0);
}

}  // namespace
}  // namespace xv::worker
