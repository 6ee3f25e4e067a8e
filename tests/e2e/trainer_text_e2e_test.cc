// Trainer text end to end (issue 11) with real processes: `xvd`, `xv-worker` with the command
// trainer tests/fixtures/odd_text_trainer.sh, and `xvctl`.
//  - OddTrainerTextEndsAsTheExitSaysAndEveryListingStillWorks: a trainer printing invalid UTF-8 and
//    a 6,001-byte line of "é" to stderr, invalid bytes to stdout and (the failing one) a 20 KB
//    `error` message of "é" ends succeeded / failed as its exit code says, within seconds (before
//    the fix its Finished could not be parsed by xvd and the worker resent it forever, the
//    experiment stuck `assigned`). The stored stderr tails, failure detail and events are valid
//    UTF-8 with U+FFFD where the bytes were invalid; `xvctl results` and `--json` work; xvd keeps
//    serving; the worker holds nothing (spool empty, nothing set aside).
//  - ALineXvdCannotTakeIsSetAsideNotReplayedForever: a trainer printing one `error` line nested
//    100,000 deep. Whether xvd takes it (its JSON depth limit) or dies on it (it did: a crash loop,
//    the worker replaying the spooled line after every restart), the test restarts xvd whenever it
//    is gone and the experiment ends `failed` after at most 5 restarts; a line xvd died on is set
//    aside in the spool's .quarantine file with its reason, and the worker owes nothing after.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/untrusted_text.h"
#include "tests/e2e/database_file.h"
#include "tests/e2e/process_harness.h"

namespace xv::e2e {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kReplacement = "\xEF\xBF\xBD";  // U+FFFD
const std::string kEAcute = "\xC3\xA9";

class TrainerTextE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(Sandbox::BinariesBuilt());
    ASSERT_TRUE(sb_.StartDaemon(&xvd_, {"--heartbeat-ms", "200"}));
    const std::string config = sb_.Path("worker.yaml");
    const std::string program = SourcePath("tests/fixtures/odd_text_trainer.sh");
    std::ofstream(config) << "trainers:\n"
                          << "  - {name: odd-ok, kind: command, program: " << program
                          << ", args: [ok], output: xv-events}\n"
                          << "  - {name: odd-fail, kind: command, program: " << program
                          << ", args: [fail], output: xv-events}\n"
                          << "  - {name: odd-deep, kind: command, program: " << program
                          << ", args: [deep], output: xv-events}\n";
    worker_ = sb_.StartFakeWorker("tx-1", {}, {"--config", config});
  }
  void TearDown() override {
    worker_.Stop();
    xvd_.Stop();
  }

  std::string Logs() { return sb_.LogTails({"xvd.log", "tx-1.log"}); }

  // The files of the worker's spool directory other than its lock.
  std::vector<std::string> SpoolFiles() {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& f : fs::directory_iterator(sb_.work_dir("tx-1") + "/spool", ec)) {
      if (f.path().filename() != "lock") out.push_back(f.path().filename().string());
    }
    return out;
  }

  int64_t Submit(const std::string& trainer, const std::string& candidate) {
    CommandResult r = sb_.Xvctl({"submit", SourcePath("recipes/cpu-tiny.yaml"), "--trainer",
                                 trainer, "--candidate", candidate, "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err << Logs();
    json j = json::parse(r.out, nullptr, false);
    if (j.is_discarded() || j.value("experiment_ids", json::array()).size() != 1) {
      ADD_FAILURE() << r.out;
      return 0;
    }
    return j["experiment_ids"][0].get<int64_t>();
  }

  // The experiments of `xvctl results --json`, by id (empty when the command failed).
  std::map<int64_t, json> Results() {
    CommandResult r = sb_.Xvctl({"results", "--json", "--limit", "1000"});
    std::map<int64_t, json> out;
    if (r.exit_code != 0) return out;
    json j = json::parse(r.out, nullptr, false);
    if (j.is_discarded()) return out;
    for (const auto& e : j.value("experiments", json::array())) out[e["id"].get<int64_t>()] = e;
    return out;
  }

  Sandbox sb_{"tx"};
  ChildGuard xvd_;
  ChildGuard worker_;
};

TEST_F(TrainerTextE2eTest, OddTrainerTextEndsAsTheExitSaysAndEveryListingStillWorks) {
  const int64_t ok = Submit("odd-ok", "matrix_lr=0.01");
  const int64_t fail = Submit("odd-fail", "matrix_lr=0.02");
  ASSERT_NE(ok, 0);
  ASSERT_NE(fail, 0);
  std::map<int64_t, json> results;
  ASSERT_TRUE(WaitUntil(
      [&] {
        results = Results();
        return results.count(ok) && results.count(fail) &&
               results[ok].value("state", "") != "queued" &&
               results[ok].value("state", "") != "assigned" &&
               results[ok].value("state", "") != "running" &&
               results[fail].value("state", "") != "queued" &&
               results[fail].value("state", "") != "assigned" &&
               results[fail].value("state", "") != "running";
      },
      60))
      << Logs();
  EXPECT_EQ(results[ok].value("state", ""), "succeeded") << results[ok].dump() << Logs();
  EXPECT_EQ(results[fail].value("state", ""), "failed") << results[fail].dump() << Logs();
  const std::string detail = results[fail].value("failure_detail", "");
  EXPECT_TRUE(IsValidUtf8(detail));
  EXPECT_LE(detail.size(), kMaxDetailBytes);
  EXPECT_NE(detail.find(kEAcute + kEAcute + kEAcute), std::string::npos) << detail.substr(0, 200);

  // What the store holds is valid UTF-8, with U+FFFD where the trainer's bytes were invalid.
  DatabaseFile db(sb_.database_path());
  for (int64_t id : {ok, fail}) {
    const std::string tail =
        db.Value("SELECT stderr_tail FROM experiments WHERE id = " + std::to_string(id));
    EXPECT_TRUE(IsValidUtf8(tail)) << id;
    EXPECT_NE(tail.find("bad bytes " + kReplacement + kReplacement + " in stderr"),
              std::string::npos)
        << tail.substr(0, 300);
    // The 6,001-byte line, cut to 4096 bytes on a character: "x" and 2,047 "é".
    std::string cut = "x";
    for (int i = 0; i < 2047; ++i) cut += kEAcute;
    EXPECT_NE(tail.find("\n" + cut + "\n"), std::string::npos) << id;
    EXPECT_NE(tail.find("\xE2\x96\x88 100%"), std::string::npos) << tail.substr(tail.size() - 200);
    const std::string log = db.Value(
        "SELECT json FROM events WHERE source = 'trainer' AND type = 'log' AND experiment_id = " +
        std::to_string(id));
    EXPECT_TRUE(IsValidUtf8(log));
    EXPECT_NE(log.find("invalid byte"), std::string::npos) << log;
  }
  const std::string fail_tail =
      db.Value("SELECT stderr_tail FROM experiments WHERE id = " + std::to_string(fail));
  EXPECT_EQ(fail_tail.substr(fail_tail.size() - 14), "last words " + kReplacement);

  // Every listing works, for everyone, and xvd keeps serving.
  CommandResult table = sb_.Xvctl({"results", "--limit", "1000"});
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("succeeded"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("failed"), std::string::npos) << table.out;
  EXPECT_EQ(sb_.Xvctl({"status"}).exit_code, 0);
  EXPECT_TRUE(xvd_.Alive()) << Logs();
  EXPECT_TRUE(worker_.Alive()) << Logs();

  // The worker owes nothing: every Finished was acknowledged, nothing was set aside.
  ASSERT_TRUE(WaitUntil(
      [&] {
        for (const auto& f : fs::directory_iterator(sb_.work_dir("tx-1") + "/spool")) {
          if (f.path().filename() != "lock") return false;
        }
        return true;
      },
      10))
      << Logs();
  EXPECT_EQ(ReadFileText(sb_.Path("tx-1.log")).find("set aside"), std::string::npos) << Logs();
  std::printf("odd trainer text: ok=%s fail=%s, tails valid UTF-8, listings and xvd fine\n",
              results[ok].value("state", "").c_str(), results[fail].value("state", "").c_str());
}

TEST_F(TrainerTextE2eTest, ALineXvdCannotTakeIsSetAsideNotReplayedForever) {
  const int64_t id = Submit("odd-deep", "matrix_lr=0.03");
  ASSERT_NE(id, 0);
  int restarts = 0;
  std::string state;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(150);
  while (std::chrono::steady_clock::now() < until) {
    if (!xvd_.Alive()) {
      xvd_.Stop();
      ++restarts;
      ASSERT_LE(restarts, 8) << "xvd keeps dying: the line is replayed without bound" << Logs();
      ASSERT_TRUE(sb_.StartDaemon(&xvd_, {"--heartbeat-ms", "200"})) << Logs();
    }
    std::map<int64_t, json> results = Results();
    state = results.count(id) ? results[id].value("state", "") : "";
    const std::vector<std::string> files = SpoolFiles();
    const bool spooled = std::any_of(files.begin(), files.end(), [](const std::string& f) {
      return f.size() > 6 && f.compare(f.size() - 6, 6, ".spool") == 0;
    });
    if (state == "failed" && !spooled) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_EQ(state, "failed") << Logs();
  EXPECT_LE(restarts, 5) << Logs();
  EXPECT_TRUE(xvd_.Alive()) << Logs();
  EXPECT_EQ(sb_.Xvctl({"status"}).exit_code, 0);
  // The worker owes nothing; what xvd died on (if it did) waits in the quarantine file.
  std::vector<std::string> left = SpoolFiles();
  if (restarts == 0) {
    EXPECT_TRUE(left.empty()) << left.front();
  } else {
    ASSERT_EQ(left.size(), 1u) << Logs();
    EXPECT_EQ(left[0], "exp-" + std::to_string(id) + "-a1.quarantine");
    const std::string q = ReadFileText(sb_.work_dir("tx-1") + "/spool/" + left[0]);
    EXPECT_NE(q.find("never acknowledged"), std::string::npos);
    EXPECT_NE(ReadFileText(sb_.Path("tx-1.log")).find("set aside"), std::string::npos);
    DatabaseFile db(sb_.database_path());
    EXPECT_EQ(db.Int("SELECT COUNT(*) FROM events WHERE type = 'quarantined' AND experiment_id = " +
                     std::to_string(id)),
              1);
  }
  std::printf("a line xvd cannot take: experiment %s after %d xvd restart(s)\n", state.c_str(),
              restarts);
}

}  // namespace
}  // namespace xv::e2e
