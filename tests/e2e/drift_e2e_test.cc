// Decisions that survive drift, end to end (issue 14, Must show): a real `xvd`, four real
// `xv-worker` processes whose only trainer is the `command` trainer `drift`
// (tests/fixtures/drift_trainer.sh: under a fixed budget, a "load" file the test writes cuts the
// steps and raises val_bpb by 0.1 * ln(100 / steps), plus noise sd 0.01), and campaigns under
// recipes/policies/welch-95.yaml (4 + 4 runs, Welch at 95 %, max_throughput_drift 0.10 by default).
//
//  1. No drift (load 0): 50 zero-effect rounds (scalar_lr=0.6, which the trainer ignores) and 50
//     3-sigma rounds (matrix_lr=0.037): the zero-effect keep rate is <= alpha + 3 standard errors,
//     the 3-sigma keep rate >= 0.90, and no round is confounded (tok/s does not move).
//  2. Drift: 25 zero-effect and 25 3-sigma rounds while a thread flips the load between 0 and 0.5
//     every 1.5 s, so that some rounds straddle a change (0.5 load: steps 50, val_bpb +0.069, 7
//     sigma). Every round is decided or marked confounded: the zero-effect keep rate stays <=
//     alpha + 3 standard errors and a 3-sigma candidate is kept or its round confounded in >= 90 %
//     of rounds; some rounds are confounded (the guard fired).
//  3. Every round's runs were dispatched in its recorded order (the first 'assigned' event of
//     each run, in event order, follows run_order), every block holds every arm once, and no run
//     reused a result.
// Each round is the first of its own campaign (own seed), so rounds are independent.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "tests/e2e/database_file.h"
#include "tests/e2e/process_harness.h"

namespace xv::e2e {
namespace {

using nlohmann::json;

constexpr int kWorkers = 4;
constexpr int kRoundsPerKind = 50;       // without drift
constexpr int kDriftRoundsPerKind = 25;  // with drift
constexpr double kAlpha = 0.05;

class DriftE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(Sandbox::BinariesBuilt());
    SetLoad("0 0");
    ASSERT_TRUE(sb_.StartDaemon(&xvd_, {"--heartbeat-ms", "200", "--log-level", "warn"}));
    const std::string config = sb_.Path("worker.yaml");
    std::ofstream(config) << "trainers:\n"
                             "  - name: drift\n"
                             "    kind: command\n"
                             "    program: "
                          << SourcePath("tests/fixtures/drift_trainer.sh")
                          << "\n"
                             "    env: {XV_NOISY_SIGMA: \"0.01\", XV_DRIFT_LOAD_FILE: \""
                          << load_path()
                          << "\"}\n"
                             "    output: upstream\n";
    for (int i = 0; i < kWorkers; ++i) {
      workers_.push_back(sb_.StartFakeWorker("dr-" + std::to_string(i), {},
                                             {"--config", config, "--log-level", "warn"}));
    }
  }

  std::string load_path() const { return sb_.Path("load"); }

  // Written to a temporary file and renamed, so that the trainer never reads it half written.
  void SetLoad(const std::string& text) {
    const std::string tmp = load_path() + ".tmp";
    std::ofstream(tmp) << text << "\n";
    std::rename(tmp.c_str(), load_path().c_str());
  }

  std::string Logs() {
    std::vector<std::string> logs = {"xvd.log"};
    for (int i = 0; i < kWorkers; ++i) logs.push_back("dr-" + std::to_string(i) + ".log");
    return sb_.LogTails(logs, 1500);
  }

  struct Round {
    std::string campaign;
    bool zero_effect = true;
    int64_t round_id = 0;
    std::string error;
  };

  // Creates one campaign per round and submits its round, 4 submitters at once.
  void SubmitRounds(const std::string& tag, int seed_base, int per_kind,
                    std::vector<Round>* rounds) {
    const std::string policy = SourcePath("recipes/policies/welch-95.yaml");
    const std::string base_text = ReadFileText(SourcePath("recipes/cpu-tiny.yaml"));
    for (int i = 0; i < 2 * per_kind; ++i) {
      Round r;
      r.zero_effect = i % 2 == 0;
      r.campaign = tag + (r.zero_effect ? "-zero-" : "-strong-") + std::to_string(i / 2);
      std::ofstream(sb_.Path(r.campaign + ".yaml"))
          << base_text << "\nseed: " << seed_base + 10 * i << "\n";
      rounds->push_back(r);
    }
    std::atomic<size_t> next{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        for (size_t i = next++; i < rounds->size(); i = next++) {
          Round& r = (*rounds)[i];
          CommandResult c = sb_.Xvctl({"campaign", "create", r.campaign, "--recipe",
                                       sb_.Path(r.campaign + ".yaml"), "--policy", policy,
                                       "--trainer", "drift", "--json"});
          if (c.exit_code != 0) {
            r.error = "campaign create: " + c.out + c.err;
            continue;
          }
          CommandResult s =
              sb_.Xvctl({"submit", "--campaign", r.campaign, "--candidate",
                         r.zero_effect ? "scalar_lr=0.6" : "matrix_lr=0.037", "--json"});
          json sj = json::parse(s.out, nullptr, false);
          if (s.exit_code != 0 || sj.is_discarded()) {
            r.error = "submit: " + s.out + s.err;
            continue;
          }
          r.round_id = sj.value("round_id", int64_t{0});
        }
      });
    }
    for (auto& t : threads) t.join();
  }

  struct Tally {
    int kept_zero = 0, kept_strong = 0, confounded_zero = 0, confounded_strong = 0;
  };

  // Waits until every round is decided and counts keeps and confounded rounds.
  void WaitAndTally(const std::vector<Round>& rounds, Tally* tally) {
    CommandResult w = sb_.Xvctl({"wait", "--timeout", "300"}, 320);
    ASSERT_EQ(w.exit_code, 0) << w.out << w.err << Logs();
    DatabaseFile db(sb_.database_path());
    for (int attempt = 0; attempt < 100; ++attempt) {
      if (db.Int("SELECT COUNT(*) FROM rounds WHERE state = 'open'") == 0) break;
      ::usleep(200 * 1000);
    }
    for (const Round& r : rounds) {
      ASSERT_TRUE(r.error.empty()) << r.campaign << ": " << r.error << Logs();
      const std::string id = std::to_string(r.round_id);
      ASSERT_EQ(db.Value("SELECT state FROM rounds WHERE id = " + id), "decided") << r.campaign;
      EXPECT_EQ(db.Int("SELECT COUNT(*) FROM experiments WHERE round_id = " + id +
                       " AND state <> 'succeeded'"),
                0)
          << r.campaign << Logs();
      const bool kept =
          db.Int("SELECT COALESCE(kept_experiment_id, 0) FROM rounds WHERE id = " + id) != 0;
      const json decision = json::parse(
          db.Value("SELECT decision_json FROM rounds WHERE id = " + id), nullptr, false);
      ASSERT_TRUE(decision.is_object()) << r.campaign;
      const bool confounded = decision.contains("confounded");
      EXPECT_FALSE(kept && confounded) << r.campaign;
      EXPECT_TRUE(decision.contains("drift")) << decision.dump();
      if (r.zero_effect) {
        tally->kept_zero += kept;
        tally->confounded_zero += confounded;
      } else {
        tally->kept_strong += kept;
        tally->confounded_strong += confounded;
      }
    }
  }

  // Step 3 of the file comment, for every round of the sandbox.
  void ExpectDispatchFollowedTheOrder() {
    DatabaseFile db(sb_.database_path());
    EXPECT_EQ(db.Int("SELECT COUNT(*) FROM experiments WHERE reused_from_id IS NOT NULL OR "
                     "attempt < 1 OR run_order IS NULL"),
              0);
    // Per round, its runs by their first 'assigned' event.
    const auto rows = db.Rows(
        "SELECT e.round_id, e.run_order, e.run_block, e.name FROM experiments e JOIN (SELECT "
        "experiment_id, MIN(id) AS first FROM events WHERE type = 'state' AND "
        "json_extract(json, '$.state') = 'assigned' GROUP BY experiment_id) a ON "
        "a.experiment_id = e.id ORDER BY e.round_id, a.first");
    ASSERT_EQ(static_cast<int64_t>(rows.size()), db.Int("SELECT COUNT(*) FROM experiments"));
    std::map<std::string, std::vector<int>> order;
    std::map<std::string, std::map<std::string, std::multiset<std::string>>> blocks;
    for (const auto& row : rows) {
      order[row[0]].push_back(std::stoi(row[1]));
      blocks[row[0]][row[2]].insert(row[3]);
    }
    for (const auto& [round, positions] : order) {
      for (size_t i = 0; i < positions.size(); ++i) {
        EXPECT_EQ(positions[i], static_cast<int>(i)) << "round " << round << " went out of order";
      }
      ASSERT_EQ(blocks[round].size(), 4u) << "round " << round;
      for (const auto& [block, arms] : blocks[round]) {
        EXPECT_EQ(arms.size(), 2u) << "round " << round << " block " << block;
        EXPECT_EQ(arms.count("head"), 1u) << "round " << round << " block " << block;
      }
    }
  }

  Sandbox sb_{"dr"};
  ChildGuard xvd_;
  std::vector<ChildGuard> workers_;
};

TEST_F(DriftE2eTest, RoundsAreDecidedCorrectlyOrMarkedConfoundedUnderDrift) {
  const double n = kRoundsPerKind;
  const double tolerance = 3 * std::sqrt(kAlpha * (1 - kAlpha) / n);
  const auto t0 = std::chrono::steady_clock::now();

  // 1. No drift.
  std::vector<Round> calm;
  SubmitRounds("calm", 1000, kRoundsPerKind, &calm);
  Tally quiet;
  ASSERT_NO_FATAL_FAILURE(WaitAndTally(calm, &quiet));
  auto seconds = [&t0] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  std::printf(
      "no drift: zero-effect keep rate %.2f, 3-sigma keep rate %.2f, confounded %d+%d (%.1f s)\n",
      quiet.kept_zero / n, quiet.kept_strong / n, quiet.confounded_zero, quiet.confounded_strong,
      seconds());
  EXPECT_LE(quiet.kept_zero / n, kAlpha + tolerance);
  EXPECT_GE(quiet.kept_strong / n, 0.90);
  EXPECT_EQ(quiet.confounded_zero + quiet.confounded_strong, 0);

  // 2. Drift: the load flips during the rounds.
  SetLoad("0 0.05");
  std::atomic<bool> stop{false};
  std::thread flipper([&] {
    bool loaded = false;
    while (!stop) {
      for (int i = 0; i < 30 && !stop; ++i) ::usleep(50 * 1000);
      loaded = !loaded;
      SetLoad(loaded ? "0.5 0.05" : "0 0.05");
    }
  });
  std::vector<Round> drifting;
  SubmitRounds("drift", 5000, kDriftRoundsPerKind, &drifting);
  Tally noisy;
  WaitAndTally(drifting, &noisy);
  stop = true;
  flipper.join();
  const double m = kDriftRoundsPerKind;
  std::printf(
      "drift: zero-effect keep rate %.2f (confounded %d), 3-sigma kept %d + confounded %d of %d; "
      "%.1f s in all\n",
      noisy.kept_zero / m, noisy.confounded_zero, noisy.kept_strong, noisy.confounded_strong,
      kDriftRoundsPerKind, seconds());
  EXPECT_LE(noisy.kept_zero / m, kAlpha + 3 * std::sqrt(kAlpha * (1 - kAlpha) / m));
  EXPECT_GE((noisy.kept_strong + noisy.confounded_strong) / m, 0.90);
  EXPECT_GT(noisy.confounded_zero + noisy.confounded_strong, 0) << "no round saw the load change";

  // 3. The order.
  ExpectDispatchFollowedTheOrder();

  // campaign show prints the order and the drift.
  CommandResult show = sb_.Xvctl({"campaign", "show", drifting[0].campaign});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("run order (seed "), std::string::npos) << show.out;
  EXPECT_NE(show.out.find(" drift: tok/s head "), std::string::npos) << show.out;
}

}  // namespace
}  // namespace xv::e2e
