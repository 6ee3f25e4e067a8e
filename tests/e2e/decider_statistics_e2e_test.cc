// The decider's statistics end to end (issue 5, Must show #1): a real `xvd`, four real `xv-worker`
// processes whose only trainer is the `command` trainer `noisy` (tests/fixtures/noisy_trainer.sh:
// val_bpb = 1 + 10 * matrix_lr + 0.01 * N(0, 1), printed in upstream train.py's format, so the
// worker's upstream parser is on the path), and campaigns under recipes/policies/welch-95.yaml
// (4 candidate runs + 4 head controls, one-sided Welch at 95 %, Bonferroni, min effect 0.0005).
//
//  - zero-effect rounds: candidate scalar_lr=0.6 (the base says 0.5). The fake ignores scalar_lr,
//    so the candidate's val_bpb has the head's distribution; only its noise stream differs (the
//    noise is seeded by every knob). Its keep rate must be <= alpha + 3 * sqrt(alpha (1 - alpha) /
//    n).
//  - 3-sigma rounds: candidate matrix_lr=0.037 (the base says 0.04): 3 * sigma / 10 lower, i.e. a
//    val_bpb 0.03 = 3 sigma better. Its keep rate must be >= 0.90.
//
// Independence of rounds: every round is the first round of its own campaign, whose base recipe has
// its own seed, so a keep (which moves that campaign's head) never touches another round, and no
// round pools or reuses another's head runs (both are per campaign). All campaigns are created and
// submitted up front, so the four workers always have work. The noise is a function of the resolved
// config, so the measured rates are the same on every run of this test.
// XV_DECIDER_E2E_ROUNDS overrides the number of rounds of each kind (default 200).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "tests/e2e/process_harness.h"

namespace xv::e2e {
namespace {

using nlohmann::json;

constexpr double kSigma = 0.01;
constexpr int kWorkers = 4;
constexpr int kSubmitThreads = 4;

int RoundsPerKind() {
  const char* v = getenv("XV_DECIDER_E2E_ROUNDS");
  return v != nullptr && std::atoi(v) > 0 ? std::atoi(v) : 200;
}

class DeciderStatisticsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(Sandbox::BinariesBuilt());
    ASSERT_TRUE(sb_.StartDaemon(&xvd_, {"--heartbeat-ms", "200", "--log-level", "warn"}));
    // The workers' only trainer: the noisy command trainer, read in upstream's format.
    const std::string config = sb_.Path("worker.yaml");
    std::ofstream(config) << "trainers:\n"
                             "  - name: noisy\n"
                             "    kind: command\n"
                             "    program: "
                          << SourcePath("tests/fixtures/noisy_trainer.sh")
                          << "\n"
                             "    env: {XV_NOISY_SIGMA: \""
                          << kSigma
                          << "\"}\n"
                             "    output: upstream\n";
    for (int i = 0; i < kWorkers; ++i) {
      // --trainer-bin: the scripted fake answers `fingerprint` at once (no libtorch is offered).
      workers_.push_back(sb_.StartFakeWorker("ds-" + std::to_string(i), {},
                                             {"--config", config, "--log-level", "warn"}));
    }
  }

  CommandResult Xvctl(std::vector<std::string> args, double timeout_s = 60) {
    return sb_.Xvctl(std::move(args), timeout_s);
  }

  std::string Logs() {
    std::vector<std::string> logs = {"xvd.log"};
    for (int i = 0; i < kWorkers; ++i) logs.push_back("ds-" + std::to_string(i) + ".log");
    return sb_.LogTails(logs, 1500);
  }

  Sandbox sb_{"ds"};
  ChildGuard xvd_;
  std::vector<ChildGuard> workers_;
};

struct Round {
  std::string campaign;
  std::string candidate;  // "scalar_lr=0.6" or "matrix_lr=0.037"
  bool zero_effect = true;
  int64_t campaign_id = 0;
  int64_t round_id = 0;
  std::string error;
};

TEST_F(DeciderStatisticsE2eTest, WelchKeepsZeroEffectAtAlphaAndThreeSigmaAtLeast90Percent) {
  const int n = RoundsPerKind();
  const std::string policy = SourcePath("recipes/policies/welch-95.yaml");
  const std::string base_text = ReadFileText(SourcePath("recipes/cpu-tiny.yaml"));
  ASSERT_FALSE(base_text.empty());
  ASSERT_EQ(base_text.find("\nseed:"), std::string::npos) << "cpu-tiny sets a seed; pick another";
  ASSERT_EQ(base_text.find("\nscalar_lr:"), std::string::npos);
  ASSERT_EQ(base_text.find("\nmatrix_lr:"), std::string::npos);  // upstream's 0.04

  // Zero-effect and 3-sigma rounds interleaved, so both kinds run under the same load.
  std::vector<Round> rounds;
  for (int i = 0; i < 2 * n; ++i) {
    Round r;
    r.zero_effect = i % 2 == 0;
    r.campaign = (r.zero_effect ? "zero-" : "strong-") + std::to_string(i / 2);
    r.candidate = r.zero_effect ? "scalar_lr=0.6" : "matrix_lr=0.037";
    // Head controls run seeds s..s+3 and candidates s..s+3: a stride of 10 keeps campaigns apart.
    const std::string recipe = sb_.Path(r.campaign + ".yaml");
    std::ofstream(recipe) << base_text << "\nseed: " << 1000 + 10 * i << "\n";
    rounds.push_back(r);
  }

  const auto t0 = std::chrono::steady_clock::now();
  std::atomic<size_t> next{0};
  std::vector<std::thread> submitters;
  for (int t = 0; t < kSubmitThreads; ++t) {
    submitters.emplace_back([&] {
      for (size_t i = next++; i < rounds.size(); i = next++) {
        Round& r = rounds[i];
        CommandResult c =
            Xvctl({"campaign", "create", r.campaign, "--recipe", sb_.Path(r.campaign + ".yaml"),
                   "--policy", policy, "--trainer", "noisy", "--json"});
        json cj = json::parse(c.out, nullptr, false);
        if (c.exit_code != 0 || cj.is_discarded()) {
          r.error = "campaign create: " + c.out + c.err;
          continue;
        }
        r.campaign_id = cj.value("id", int64_t{0});
        CommandResult s =
            Xvctl({"submit", "--campaign", r.campaign, "--candidate", r.candidate, "--json"});
        json sj = json::parse(s.out, nullptr, false);
        if (s.exit_code != 0 || sj.is_discarded()) {
          r.error = "submit: " + s.out + s.err;
          continue;
        }
        r.round_id = sj.value("round_id", int64_t{0});
        if (sj.value("experiment_ids", json::array()).size() != 8) {
          r.error = "expected 4 candidate runs + 4 head controls: " + s.out;
        }
      }
    });
  }
  for (auto& t : submitters) t.join();
  for (const Round& r : rounds)
    ASSERT_TRUE(r.error.empty()) << r.campaign << ": " << r.error << Logs();
  const double submit_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // Every experiment ends; then every round is decided (the daemon decides on its monitor tick).
  CommandResult w = Xvctl({"wait", "--timeout", "600"}, 620);
  ASSERT_EQ(w.exit_code, 0) << w.out << w.err << Logs();
  std::map<int64_t, std::vector<json>> by_round;
  for (int attempt = 0; attempt < 100; ++attempt) {
    CommandResult res = Xvctl({"results", "--json", "--limit", "0"}, 120);
    ASSERT_EQ(res.exit_code, 0) << res.err;
    json all = json::parse(res.out, nullptr, false);
    ASSERT_FALSE(all.is_discarded()) << res.out.substr(0, 2000);
    by_round.clear();
    int undecided = 0;
    for (const auto& e : all.value("experiments", json::array())) {
      const int64_t round = e.value("round_id", int64_t{0});
      by_round[round].push_back(e);
      const std::string d = e.value("decision", "");
      if (d != "keep" && d != "discard" && d != "control") ++undecided;
    }
    if (undecided == 0) break;
    ::usleep(200 * 1000);
  }
  const double total_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  int kept_zero = 0, kept_strong = 0, failed_runs = 0;
  double sum_zero = 0, sum_head = 0;
  int n_zero = 0, n_head = 0;
  for (const Round& r : rounds) {
    const auto it = by_round.find(r.round_id);
    ASSERT_NE(it, by_round.end()) << "round " << r.round_id << " of " << r.campaign;
    ASSERT_EQ(it->second.size(), 8u) << r.campaign;
    int keeps = 0;
    for (const json& e : it->second) {
      if (e.value("state", "") != "succeeded") {
        ++failed_runs;
        ADD_FAILURE() << r.campaign << ": " << e.dump();
      }
      const std::string d = e.value("decision", "");
      ASSERT_TRUE(d == "keep" || d == "discard" || d == "control")
          << r.campaign << ": " << e.dump();
      if (d == "keep") ++keeps;
      ASSERT_TRUE(e["val_bpb"].is_number()) << e.dump();
      if (r.zero_effect) {
        const double v = e["val_bpb"].get<double>();
        if (d == "control") {
          sum_head += v;
          ++n_head;
        } else {
          sum_zero += v;
          ++n_zero;
        }
      }
    }
    // A kept candidate keeps all its replicates; a discarded one none.
    ASSERT_TRUE(keeps == 0 || keeps == 4) << r.campaign << ": " << keeps << " keep rows";
    if (keeps > 0) (r.zero_effect ? kept_zero : kept_strong)++;
  }
  ASSERT_EQ(failed_runs, 0) << Logs();

  const double alpha = 0.05;  // welch-95: confidence 0.95, one candidate per round
  const double zero_rate = static_cast<double>(kept_zero) / n;
  const double strong_rate = static_cast<double>(kept_strong) / n;
  const double tolerance = 3 * std::sqrt(alpha * (1 - alpha) / n);
  std::printf(
      "decider e2e (welch-95, 4+4 runs, sigma %.3g, %d workers): zero-effect keep rate %.3f "
      "(%d/%d, limit %.3f = alpha %.2f + %.3f), 3-sigma keep rate %.3f (%d/%d, limit >= 0.90); "
      "%d experiments in %.1f s (submitting took %.1f s)\n",
      kSigma, kWorkers, zero_rate, kept_zero, n, alpha + tolerance, alpha, tolerance, strong_rate,
      kept_strong, n, 16 * n, total_s, submit_s);
  std::printf("zero-effect rounds: mean val_bpb candidate %.5f, head %.5f (expected 1.40000)\n",
              sum_zero / std::max(n_zero, 1), sum_head / std::max(n_head, 1));
  std::fflush(stdout);
  EXPECT_LE(zero_rate, alpha + tolerance);
  EXPECT_GE(strong_rate, 0.90);
  // The noise really is noise: the pooled means sit near 1.4 (sd of a mean of 800 runs: 0.00035).
  EXPECT_NEAR(sum_zero / std::max(n_zero, 1), 1.4, 0.003);
  EXPECT_NEAR(sum_head / std::max(n_head, 1), 1.4, 0.003);
}

// Placement by trainer name: an experiment for a trainer no connected worker offers waits in the
// queue (it is not refused: a worker offering it may register later), `xvctl status` says so, and
// it blocks nothing behind it.
TEST_F(DeciderStatisticsE2eTest, AnExperimentForAnUnofferedTrainerWaitsAndStatusSaysSo) {
  const std::string recipe = SourcePath("recipes/cpu-tiny.yaml");
  CommandResult lt = Xvctl({"submit", recipe, "--trainer", "libtorch", "--json"});
  ASSERT_EQ(lt.exit_code, 0) << lt.out << lt.err;
  CommandResult ns = Xvctl({"submit", recipe, "--set", "seed=7", "--trainer", "noisy", "--json"});
  ASSERT_EQ(ns.exit_code, 0) << ns.out << ns.err;
  json ids = json::parse(ns.out)["experiment_ids"];
  ASSERT_EQ(ids.size(), 1u) << ns.out;
  CommandResult w = Xvctl({"wait", std::to_string(ids[0].get<int64_t>()), "--timeout", "60"}, 90);
  ASSERT_EQ(w.exit_code, 0) << w.out << w.err << Logs();

  json status;
  for (int i = 0; i < 100; ++i) {  // until the four workers are connected
    CommandResult st = Xvctl({"status", "--json"});
    ASSERT_EQ(st.exit_code, 0) << st.err;
    status = json::parse(st.out);
    int connected = 0;
    for (const auto& wk : status["workers"]) connected += wk["trainers"] == json::array({"noisy"});
    if (connected == kWorkers) break;
    ::usleep(100 * 1000);
  }
  EXPECT_EQ(status["queued"], 1) << status.dump(2);
  ASSERT_EQ(status["unserved_trainers"].size(), 1u) << status.dump(2);
  EXPECT_EQ(status["unserved_trainers"][0]["trainer"], "libtorch");
  EXPECT_EQ(status["unserved_trainers"][0]["queued"], 1);
  CommandResult text = Xvctl({"status"});
  EXPECT_NE(text.out.find("waiting: 1 queued experiment(s) need trainer 'libtorch', which no "
                          "connected worker offers"),
            std::string::npos)
      << text.out;
}

}  // namespace
}  // namespace xv::e2e
